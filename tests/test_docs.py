"""The documentation holds: README.md is a front door under 12,000 characters with a contents list that
matches its headings; every relative link in README.md and docs/**/*.md reaches a file (and, from README
and the guides, an anchor that exists); every `perseval ...` and `make ...` command shown in README and the
guides is a real command with real options; the paths and perseval modules they name exist; and README
shows the test command that CI (.ci/run) runs. Fast: no run, one subprocess."""
from __future__ import annotations

import re
import shlex
import subprocess
import sys
import unicodedata
from functools import lru_cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
README_LIMIT = 12_000
DOCS = sorted((ROOT / "docs").rglob("*.md"))
GUIDES = sorted((ROOT / "docs" / "guides").glob("*.md"))
# the pages whose commands, paths and anchors are checked in full (links are checked in every page)
OWN_PAGES = [README, ROOT / "docs" / "index.md", *GUIDES]
SHELL_BLOCKS = {"bash", "sh", "shell", "console"}

FENCE = re.compile(r"^(```|~~~)\s*([\w+-]*)[^\n]*\n(.*?)^\1\s*$", re.M | re.S)
LINK = re.compile(r"(?<!!)\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
INLINE_CODE = re.compile(r"(`+)(.+?)\1", re.S)


def rel(path: Path) -> str:
    return str(path.relative_to(ROOT))


def without_code(text: str) -> str:
    """The prose of a page: fenced blocks and inline code removed (a link inside them is not a link)."""
    return INLINE_CODE.sub("", FENCE.sub("", text))


def code_blocks(text: str) -> list[tuple[str, str]]:
    return [(m.group(2).lower(), m.group(3)) for m in FENCE.finditer(text)]


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: links and code marks dropped, lowercase, punctuation removed, spaces -> -."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading).replace("`", "")
    text = "".join(c for c in text.lower() if c in " -_" or unicodedata.category(c)[0] in "LN")
    return text.replace(" ", "-")


@lru_cache(maxsize=None)
def anchors(path: Path) -> frozenset[str]:
    """Every heading anchor of a Markdown file (duplicates numbered as GitHub does)."""
    seen: dict[str, int] = {}
    out = set()
    for m in re.finditer(r"^#{1,6}\s+(.+?)\s*#*\s*$", FENCE.sub("", path.read_text()), re.M):
        base = slug(m.group(1))
        n = seen.get(base, 0)
        seen[base] = n + 1
        out.add(base if n == 0 else f"{base}-{n}")
    return frozenset(out)


def links(path: Path) -> list[str]:
    return [m.group(1) for m in LINK.finditer(without_code(path.read_text()))]


def test_readme_is_a_front_door_under_12k_characters():
    size = len(README.read_text())
    assert size < README_LIMIT, f"README.md has {size} characters; the limit is {README_LIMIT}: move detail to docs/guides/"


def test_readme_contents_list_matches_its_headings():
    text = README.read_text()
    body = FENCE.sub("", text)
    m = re.search(r"^## Contents\s*\n((?:\s*[-*] .*\n)+)", body, re.M)
    assert m, "README.md needs a '## Contents' list right under its heading"
    listed = re.findall(r"\]\(#([^)]+)\)", m.group(1))
    sections = [slug(h) for h in re.findall(r"^## (.+?)\s*$", body, re.M) if h.strip() != "Contents"]
    assert listed == sections, f"contents list {listed} != README's sections {sections}"
    assert set(listed) <= anchors(README)


def test_every_relative_link_resolves():
    missing, bad_anchor = [], []
    for page in [README, *DOCS]:
        for target in links(page):
            if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto:
                continue
            file_part, _, anchor = target.partition("#")
            dest = page if not file_part else (page.parent / file_part).resolve()
            if not dest.exists():
                missing.append(f"{rel(page)} -> {target}")
                continue
            if anchor and page in OWN_PAGES and dest.suffix == ".md" and anchor not in anchors(dest):
                bad_anchor.append(f"{rel(page)} -> {target}")
    assert not missing + bad_anchor, ("links to files that do not exist:\n  " + "\n  ".join(missing or ["(none)"])
                                      + "\nlinks to anchors that do not exist:\n  " + "\n  ".join(bad_anchor or ["(none)"]))


def command_lines(text: str) -> list[str]:
    """Each shell command of a page's shell blocks (continuations joined, comments and prompts dropped),
    split at &&, ;, | and &."""
    out = []
    for lang, block in code_blocks(text):
        if lang not in SHELL_BLOCKS:
            continue
        for line in block.replace("\\\n", " ").splitlines():
            line = re.sub(r"(^|\s)#.*$", "", line).strip().removeprefix("$ ")
            out += [part.strip() for part in re.split(r"&&|\|\||;|\||(?<![>&])&(?!&)", line) if part.strip()]
    return out


def words(command: str) -> list[str]:
    try:
        return shlex.split(command)
    except ValueError:
        return command.split()


def perseval_calls(page: Path) -> list[tuple[str, list[str], str]]:
    """(subcommand, options, where) of every `perseval X ...` in the page's shell blocks and inline code."""
    text = page.read_text()
    commands = command_lines(text)
    commands += [m.group(2) for m in INLINE_CODE.finditer(FENCE.sub("", text)) if m.group(2).startswith("perseval ")]
    calls = []
    for command in commands:
        toks = words(command)
        for i, tok in enumerate(toks):
            if tok.rsplit("/", 1)[-1] == "perseval" and i + 1 < len(toks):
                sub = toks[i + 1]
                if sub.startswith("-") or sub in {"...", "…"}:
                    break
                rest = toks[i + 2:]
                if sub in command_groups() and rest and not rest[0].startswith("-"):  # perseval iba agreement
                    sub, rest = f"{sub} {rest[0]}", rest[1:]
                opts = [t.split("=", 1)[0] for t in rest if t.startswith("--")]
                calls.append((sub, opts, f"{rel(page)}: {command}"))
                break
    return calls


def make_calls(page: Path) -> list[tuple[str, str]]:
    """(target, where) of every `make T` in the page's shell blocks and inline code."""
    text = page.read_text()
    commands = command_lines(text)
    commands += [m.group(2) for m in INLINE_CODE.finditer(FENCE.sub("", text)) if m.group(2).startswith("make ")]
    out = []
    for command in commands:
        toks = words(command)
        for i, tok in enumerate(toks):
            if tok == "make":
                out += [(t, f"{rel(page)}: {command}") for t in toks[i + 1:] if not t.startswith("-") and "=" not in t]
                break
    return out


def cli_commands() -> dict[str, set[str]]:
    """Every command, a benchmark's own ones as `<benchmark> <command>`, with its options."""
    import typer.main

    from perseval_flows.cli import app

    def options(cmd) -> set[str]:
        return {o for p in cmd.params for o in (*p.opts, *p.secondary_opts) if o.startswith("-")} | {"--help"}

    out = {}
    for name, cmd in typer.main.get_command(app).commands.items():
        out[name] = options(cmd)
        for sub, subcmd in getattr(cmd, "commands", {}).items():
            out[f"{name} {sub}"] = options(subcmd)
    return out


def command_groups() -> set[str]:
    return {name.split()[0] for name in cli_commands() if " " in name}


def test_every_perseval_command_shown_is_real():
    from typer.testing import CliRunner

    from perseval_flows.cli import app

    calls = [c for page in OWN_PAGES for c in perseval_calls(page)]
    assert any(where.startswith("README.md") for _, _, where in calls), "README shows no perseval command"
    known = cli_commands()
    unknown = [f"{where}  (no command {sub!r})" for sub, _, where in calls if sub not in known]
    bad_opts = [f"{where}  (perseval {sub} has no {o})" for sub, opts, where in calls if sub in known
                for o in opts if o not in known[sub]]
    assert not unknown + bad_opts, "\n".join(unknown + bad_opts)
    runner = CliRunner()
    for sub in sorted({sub for sub, _, _ in calls}):
        result = runner.invoke(app, [*sub.split(), "--help"])
        assert result.exit_code == 0, f"perseval {sub} --help exited {result.exit_code}: {result.output}"
    # the installed entry point itself, once (the same app as a process, as a user types it)
    proc = subprocess.run([sys.executable, "-m", "perseval_flows.cli", "--help"], cwd=ROOT, capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert all(sub.split()[0] in proc.stdout for sub in {sub for sub, _, _ in calls})  # `iba` for `iba agreement`


def makefile_targets() -> set[str]:
    text = (ROOT / "Makefile").read_text()
    return {t for m in re.finditer(r"^([^\s:=#][^:=]*?)\s*:(?!=)", text, re.M) for t in m.group(1).split()}


def test_every_make_target_shown_is_in_the_makefile():
    calls = [c for page in OWN_PAGES for c in make_calls(page)]
    readme_targets = {t for t, where in calls if where.startswith("README.md")}
    assert {"demo", "test"} <= readme_targets, "README must show the two commands: make demo and make test"
    targets = makefile_targets()
    unknown = [f"{where}  (no target {t!r})" for t, where in calls if t not in targets]
    assert not unknown, "\n".join(unknown)


def test_readme_shows_the_test_command_ci_runs():
    ci = [line.strip() for line in (ROOT / ".ci" / "run").read_text().splitlines()
          if line.strip() and not line.lstrip().startswith("#")]
    command = ci[-1]
    assert command in command_lines(README.read_text()), f"README's code blocks do not show CI's command {command!r}"


REPO_PATH = re.compile(r"^(?:\.\./)*((?:configs|scripts|infra|perseval|tasks|flows|tests|docs)/[\w./*-]*|Makefile|\.ci/run)$")


def named_paths(page: Path) -> list[str]:
    """Repository paths a page names in inline code or in its shell commands (placeholders skipped)."""
    text = page.read_text()
    spans = [m.group(2).strip() for m in INLINE_CODE.finditer(FENCE.sub("", text))]
    spans += [w for command in command_lines(text) for w in words(command)]
    return [s for s in spans if REPO_PATH.match(s) and not re.search(r"[<>{}]|\.\.\.|…", s)]


def test_paths_the_docs_name_exist():
    missing = []
    for page in OWN_PAGES:
        for path in named_paths(page):
            clean = re.sub(r"^(?:\.\./)+", "", path)
            exists = any(ROOT.glob(clean.rstrip("/"))) if "*" in clean else (ROOT / clean).exists()
            if not exists or (clean.endswith("/") and not (ROOT / clean).is_dir()):
                missing.append(f"{rel(page)}: {path}")
    assert not missing, "paths named in the docs that do not exist:\n  " + "\n  ".join(missing)


def resolve_module(dotted: str) -> tuple[Path | None, list[str]]:
    """The file a `perseval.a.b.attr` name lives in, and the attribute names left after it."""
    parts = dotted.split(".")
    path = ROOT / parts[0]
    for i, part in enumerate(parts[1:], start=1):
        if (path / part).is_dir():
            path = path / part
        elif (path / f"{part}.py").is_file():
            return path / f"{part}.py", parts[i + 1:]
        else:
            return (path / "__init__.py" if path.is_dir() else None), parts[i:]
    return path / "__init__.py", []


def test_perseval_modules_the_docs_name_exist():
    """`perseval.kernel.params.Params`-style names: the module exists and defines the first attribute named.
    Only names inside a perseval package are checked (`perseval.status` and the like are MLflow tags)."""
    wings = {p.name for p in (ROOT / "perseval").iterdir() if p.is_dir() and not p.name.startswith("_")}
    problems = []
    for page in OWN_PAGES:
        for m in INLINE_CODE.finditer(FENCE.sub("", page.read_text())):
            name = m.group(2).strip().rstrip("()")
            if not re.fullmatch(r"perseval(\.\w+)+", name) or name.split(".")[1] not in wings:
                continue
            module, rest = resolve_module(name)
            if module is None or not module.exists():
                problems.append(f"{rel(page)}: {name} (no module)")
            elif rest and not re.search(rf"^\s*(?:class|def)\s+{rest[0]}\b|^\s*{rest[0]}\s*[:=]|import.*\b{rest[0]}\b",
                                        module.read_text(), re.M):
                problems.append(f"{rel(page)}: {name} ({rest[0]} not in {rel(module)})")
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("page", GUIDES, ids=lambda p: p.name)
def test_each_guide_has_a_title_and_a_contents_list_that_matches(page):
    body = FENCE.sub("", page.read_text())
    assert body.startswith("# "), f"{rel(page)} starts with its title"
    m = re.search(r"^## Contents\s*\n((?:\s*[-*] .*\n)+)", body, re.M)
    assert m, f"{rel(page)} needs a '## Contents' list"
    listed = re.findall(r"\]\(#([^)]+)\)", m.group(1))
    sections = [slug(h) for h in re.findall(r"^## (.+?)\s*$", body, re.M) if h.strip() != "Contents"]
    assert listed == sections, f"{rel(page)}: contents {listed} != sections {sections}"


def test_mkdocs_nav_names_existing_pages_and_every_guide():
    import yaml

    def pages(node):
        if isinstance(node, str):
            yield node
        elif isinstance(node, list):
            for item in node:
                yield from pages(item)
        elif isinstance(node, dict):
            for value in node.values():
                yield from pages(value)

    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text())
    docs_dir = ROOT / config.get("docs_dir", "docs")
    nav = list(pages(config["nav"]))
    missing = [p for p in nav if not (docs_dir / p).is_file()]
    unlisted = [rel(g) for g in GUIDES if str(g.relative_to(docs_dir)) not in nav]
    assert not missing + unlisted, f"mkdocs.yml names missing pages {missing}; guides not in its nav {unlisted}"
