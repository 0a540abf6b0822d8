"""Build llama.cpp's `llama-server` into a venv's bin/, from the llama.cpp source that llama-cpp-python's
sdist (version SOURCE_VERSION, pinned here) vendors: the same ggml and llama code, built with the same CPU
flags, as the library the optional llama-cpp-python server runs (the `[llama-cpp]` extra, pinned to the same
version), and one change to the server (PATCHES) so both answer alike. llama-cpp-python itself need not be
installed: `make install` runs this beside pip, not after it.

No binary comes from anywhere but this machine's compiler: pip downloads the sdist, CMake builds one target,
statically linked. A build is kept under $PERSEVAL_HOME (default ~/.cache/perseval)/llama-server/<version>-
<flags digest>/, so a new venv on the same machine copies it instead of compiling again (about 7-8 minutes on
2 cores).

    .venv/bin/python infra/llama-server/build.py --cmake-args "-DGGML_NATIVE=OFF -DGGML_AVX2=ON ..."

Run with the venv's Python (the Makefile does): the binary goes beside it, where perseval looks first.
Standard library only.
"""
from __future__ import annotations

import argparse
import hashlib
import os
import shlex
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

PACKAGE = "llama-cpp-python"
# the sdist whose vendored llama.cpp is built: the version pyproject.toml's `[llama-cpp]` extra pins (a test
# holds them equal), so llama-server and llama-cpp-python's server run the same ggml code
SOURCE_VERSION = "0.3.36"
TARGET = "llama-server"
# one static binary with only what the server needs: no tests, examples, web UI download, curl or TLS
SERVER_ARGS = ["-DCMAKE_BUILD_TYPE=Release", "-DBUILD_SHARED_LIBS=OFF", "-DLLAMA_BUILD_TESTS=OFF",
               "-DLLAMA_BUILD_EXAMPLES=OFF", "-DLLAMA_BUILD_APP=OFF", "-DLLAMA_BUILD_TOOLS=ON",
               "-DLLAMA_BUILD_SERVER=ON", "-DLLAMA_CURL=OFF", "-DLLAMA_OPENSSL=OFF", "-DLLAMA_USE_PREBUILT_UI=OFF"]
# llama-cpp-python's own switches, which llama.cpp's CMake does not know
OWN_SWITCHES = ("-DLLAVA_BUILD", "-DLLAMA_BUILD=")
# (file, text, replacement): the one change to the vendored source. llama-server feeds each prompt into its
# sampler's token history, so a repeat penalty also weighs the prompt's last 64 tokens; llama-cpp-python's
# server penalizes repeats among the generated tokens only. Without the prompt in that history both servers
# answer alike at temperature 0 (the same 30 of 30 captured requests with the penalty off, where the patch
# changes nothing), so the request cache's answers stay the answers either server gives.
PATCHES = [("tools/server/server-context.cpp", "common_sampler_accept(smpl.get(), id, false);",
            "(void) id;  // perseval: the prompt enters no repeat-penalty history (as llama-cpp-python)")]


def cache_dir(pkg_version: str, cmake_args: list[str]) -> Path:
    home = Path(os.environ.get("PERSEVAL_HOME", Path.home() / ".cache" / "perseval"))
    flags = hashlib.sha256(" ".join(SERVER_ARGS + cmake_args).encode() + repr(PATCHES).encode()).hexdigest()[:12]
    return home / "llama-server" / f"{pkg_version}-{flags}"


def works(binary: Path) -> bool:
    try:
        return subprocess.run([str(binary), "--version"], capture_output=True, timeout=30).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


# llama-cpp-python's JSON-schema-to-GBNF converter (standard library only): installed beside the binary, so
# perseval sends llama-server the grammar llama-cpp-python's server makes without importing that package
GRAMMAR = "llama_cpp/llama_grammar.py"
GRAMMAR_NAME = "llama-server-grammar.py"  # the name beside the binary (perseval.llm.embedded.grammar_converter)


def sdist_parts(pkg_version: str, work: Path) -> tuple[Path, Path]:
    """(the sdist's vendor/llama.cpp, its llama_grammar.py), extracted under `work`."""
    # --no-binary for this package only: with :all: pip also builds the sdist's build requirements (CMake
    # among them) from source to read its metadata, about 10 minutes of a fresh install with no wheel cache;
    # with their wheels the download takes 7 s
    subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", PACKAGE, "--quiet",
                    f"{PACKAGE}=={pkg_version}", "-d", str(work)], check=True)
    sdist = next(work.glob("llama_cpp_python-*.tar.gz"))
    with tarfile.open(sdist) as tar:
        members = [m for m in tar.getmembers() if "/vendor/llama.cpp/" in m.name or m.name.endswith("/" + GRAMMAR)]
        tar.extractall(work, members=members, filter="data")
    return next(work.glob("llama_cpp_python-*/vendor/llama.cpp")), next(work.glob(f"llama_cpp_python-*/{GRAMMAR}"))


def install(src: Path, dest: Path) -> None:
    """Copied beside, then renamed over: a llama-server running from `dest` keeps its file (a copy onto a
    running binary fails with "Text file busy")."""
    shutil.copy2(src, dest.with_suffix(".part"))
    dest.with_suffix(".part").replace(dest)


def patch(source: Path) -> None:
    """Apply PATCHES; a text not found exactly once means the vendored llama.cpp changed under them."""
    for name, text, replacement in PATCHES:
        path = source / name
        code = path.read_text()
        if code.count(text) != 1:
            raise SystemExit(f"{path}: expected one `{text}` to patch, found {code.count(text)}: "
                             "llama-cpp-python's vendored llama.cpp changed; update PATCHES in infra/llama-server/build.py")
        path.write_text(code.replace(text, replacement))


def build(source: Path, out: Path, cmake_args: list[str], jobs: int) -> Path:
    patch(source)
    args = [a for a in cmake_args if not a.startswith(OWN_SWITCHES)]
    subprocess.run(["cmake", "-S", str(source), "-B", str(out), *SERVER_ARGS, *args], check=True,
                   stdout=subprocess.DEVNULL)
    subprocess.run(["cmake", "--build", str(out), "--target", TARGET, "-j", str(jobs)], check=True,
                   stdout=subprocess.DEVNULL)
    return out / "bin" / TARGET


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cmake-args", default=os.environ.get("CMAKE_ARGS", ""),
                    help="CPU flags, as llama-cpp-python was built with (default: $CMAKE_ARGS)")
    ap.add_argument("--dest", type=Path, default=Path(sys.executable).parent, help="default: beside this Python")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    args = ap.parse_args()
    cmake_args = shlex.split(args.cmake_args)
    pkg_version = SOURCE_VERSION
    kept = cache_dir(pkg_version, cmake_args) / TARGET
    kept_grammar = kept.parent / GRAMMAR_NAME
    dest = args.dest / TARGET
    t0 = time.monotonic()
    if not works(kept) or not kept_grammar.is_file():
        with tempfile.TemporaryDirectory(prefix="llama-server-") as tmp:
            source, grammar = sdist_parts(pkg_version, Path(tmp))
            kept.parent.mkdir(parents=True, exist_ok=True)
            install(grammar, kept_grammar)
            if not works(kept):
                print(f"building {TARGET} from the llama.cpp source vendored by {PACKAGE} {pkg_version} "
                      f"(about 7-8 minutes on 2 cores, once per machine) ...", flush=True)
                install(build(source, Path(tmp) / "build", cmake_args, args.jobs), kept)  # whole or absent
    install(kept, dest)
    install(kept_grammar, args.dest / GRAMMAR_NAME)
    if not works(dest):
        print(f"{dest} does not run: `{dest} --version` failed", file=sys.stderr)
        return 1
    print(f"{TARGET} ({PACKAGE} {pkg_version}) -> {dest} in {time.monotonic() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
