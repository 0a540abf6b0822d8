"""Experiment-level checks: settings each of which validates on its own but that together run nothing, run
something twice, or fail only once a server starts.

Called once from `load_experiment`, after every named config is resolved and before the components are
validated, so `perseval validate` (and `run`, before any server starts) refuses them with one line naming
the file, the key and what is allowed: an experiment with no benchmarks, an entry with no agents, an agent
that gets no cell (it needs a backbone or a retriever the experiment does not list), a name listed twice,
a benchmark entry repeated, two entries whose cells would share a name, a GGUF `source` that is a folder or
not a GGUF file, an embedded deployment
on llama-server where no llama-server binary is installed, or on llama-cpp-python where that optional
extra is not installed, a `request_cache` that is a folder or another program's file (perseval would
open it, and set it aside as damaged), an `output_root` it cannot write in or that is a folder of perseval's own
(its package, a Python environment, its repository's source), an `mlflow.tracking_uri` whose scheme MLflow does
not know; and, for `validate` and `run` only (check_keys), an openai deployment whose `api_key_env` is not set.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Sequence
from urllib.parse import urlsplit

from perseval.kernel.capabilities import needs_index, needs_model
from perseval.llm.settings import ModelConfig
from perseval.experiment.config import DEFAULT_CACHE, BenchmarkEntry, ResolvedExperiment
from perseval.core import files
from perseval.experiment.entries import entry_ids
from perseval.core.errors import ConfigError
from perseval.core.hashing import content_key
from perseval.llm.cache import foreign
from perseval.llm.embedded import llama_server_binary, require_llama_cpp_python
from perseval.llm.identity import resolve_gguf
from perseval.kernel.registry import BENCHMARKS
from perseval.experiment.specs import AgentSpec

GGUF_MAGIC = b"GGUF"  # the first four bytes of every GGUF file (llama.cpp's format)
# The schemes of an MLflow tracking URI (a `<database>+<driver>` form too: postgresql+psycopg2://); a plain
# path is a local folder (MLflow's file store).
TRACKING_SCHEMES = ("sqlite", "postgresql", "mysql", "mssql", "file", "http", "https", "databricks")


def check_experiment(exp: ResolvedExperiment, roots: Sequence[Path]) -> None:
    """Raise ConfigError for the first degenerate or duplicated setting of `exp` (see the module doc) that
    needs no component; `roots`: where the experiment's names are looked up (for the known names)."""
    _lists_without_repeats(exp)
    _has_benchmarks(exp)
    for i, entry in enumerate(exp.experiment.benchmarks):
        _entry_has_agents(exp, i, entry, roots)
    _no_repeated_entry(exp)
    _output_root(exp)
    _request_cache(exp)
    _tracking_uri(exp)
    for name, model in exp.models.items():
        if model.format == "gguf":
            _gguf_file(model, exp.file_of("models", name))
    for dep in {d.name: d for d in exp.deployments.values()}.values():
        if dep.kind == "embedded" and dep.server == "llama-server":
            _llama_server(exp.file_of("deployments", dep.name))
        elif dep.kind == "embedded" and dep.server == "llama-cpp-python":
            _llama_cpp_python(exp.file_of("deployments", dep.name))


def check_keys(exp: ResolvedExperiment) -> None:
    """Every openai deployment's `api_key_env` is set in this environment: `validate` and `run` say so before
    anything starts (the run stopped at that endpoint's start, after its data was built). The other commands
    do not ask: `show` or `stats` need no key, and a scheduled run (`deploy`) has its worker's environment."""
    for dep in {d.name: d for d in exp.deployments.values()}.values():
        if dep.kind == "openai" and dep.api_key_env and not os.environ.get(dep.api_key_env):
            raise ConfigError(f"{exp.file_of('deployments', dep.name)}: key 'api_key_env': ${dep.api_key_env} is "
                              f"not set in this environment (the key of the endpoint at {dep.base_url}); export it "
                              "(or remove api_key_env for an endpoint that takes no key)")


def check_cells(exp: ResolvedExperiment, agents: dict[str, AgentSpec], roots: Sequence[Path]) -> None:
    """Every agent of every entry gets at least one cell, given what its validated params make it use."""
    for i, entry in enumerate(exp.experiment.benchmarks):
        _entry_has_cells(exp, i, entry, agents, roots)
    _cell_names_differ(exp)


def known(roots: Sequence[Path], kind: str) -> list[str]:
    """The names of every `<kind>/*.yaml` an experiment could name (its own configs, then the shipped ones)."""
    return sorted({p.stem for root in roots for p in (root / kind).glob("*.yaml")})


def _lists_without_repeats(exp: ResolvedExperiment) -> None:
    e = exp.experiment
    lists: list[tuple[str, Sequence[str]]] = [("backbones", e.backbones), ("retrievers", e.retrievers),
                                              ("judges", e.judges)]
    for i, entry in enumerate(e.benchmarks):
        lists += [(f"benchmarks.{i}.agents", entry.agents), (f"benchmarks.{i}.judges", entry.judges or [])]
    for key, names in lists:
        twice = sorted({n for n in names if list(names).count(n) > 1})
        if twice:
            raise ConfigError(f"{exp.path}: key '{key}': {twice[0]!r} is listed twice; list each name once")


def _has_benchmarks(exp: ResolvedExperiment) -> None:
    if not exp.experiment.benchmarks:
        raise ConfigError(f"{exp.path}: key 'benchmarks': the experiment has no benchmarks, so it would run "
                          f"nothing; list at least one (registered: {', '.join(BENCHMARKS.names())})")


def _entry_has_agents(exp: ResolvedExperiment, i: int, entry: BenchmarkEntry, roots: Sequence[Path]) -> None:
    if not entry.agents:
        raise ConfigError(f"{exp.path}: key 'benchmarks.{i}.agents': benchmark {entry.name!r} has no agents, so it "
                          f"would run nothing; list at least one (known: {', '.join(known(roots, 'agents'))})")


def _entry_has_cells(exp: ResolvedExperiment, i: int, entry: BenchmarkEntry, agents: dict[str, AgentSpec],
                     roots: Sequence[Path]) -> None:
    """Every agent of the entry gets at least one run: a backbone if it uses a model, a retriever if it
    retrieves (otherwise the plan leaves it out silently and the headline has no row for it)."""
    key = f"benchmarks.{i}.agents"
    e = exp.experiment
    for name in entry.agents:
        spec = agents[name]
        if needs_model(spec.needs) and not e.backbones:
            raise ConfigError(f"{exp.path}: key 'backbones' is empty, but agent {name!r} ({key}) needs a model; "
                              f"list at least one (known: {', '.join(known(roots, 'models'))})")
        if needs_index(spec.needs, spec.search) and not e.retrievers:
            raise ConfigError(f"{exp.path}: key 'retrievers' is empty, but agent {name!r} ({key}) retrieves from "
                              f"an index; list at least one (known: {', '.join(known(roots, 'retrievers'))})")


def _no_repeated_entry(exp: ResolvedExperiment) -> None:
    """Two entries of one benchmark on the same data (source and params) and with the same `label` are one
    entry listed twice (with another sample or seed, the label is what tells them apart)."""
    first: dict[str, int] = {}
    for i, entry in enumerate(exp.experiment.benchmarks):
        same = content_key(entry.name, entry.source, entry.params, entry.label)
        if same in first:
            raise ConfigError(f"{exp.path}: key 'benchmarks.{i}': the same benchmark as benchmarks.{first[same]} "
                              f"({entry.name!r}, same source and params), so every cell would be listed twice; "
                              "merge their agents into one entry, or give each entry its own `label:` (e.g. "
                              f"label: sample{entry.sample}) to run both")
        first[same] = i


def _cell_names_differ(exp: ResolvedExperiment) -> None:
    """No two cells share a name: two entries called alike (perseval.experiment.entries) that list one agent under
    one judge would (backbones and retrievers are the experiment's, the same for both), and their headline
    rows, costs, controls and MLflow runs would be crossed."""
    entries, judges = exp.experiment.benchmarks, exp._bound.judges if exp._bound else None
    ids = entry_ids(entries)
    for j in range(len(entries)):
        for i in range(j):
            if ids[i] != ids[j]:
                continue
            shared = [a for a in entries[j].agents if a in entries[i].agents]
            same_judge = judges is None or {s.name for s in judges[i]} & {s.name for s in judges[j]}
            if shared and same_judge:
                raise ConfigError(
                    f"{exp.path}: key 'benchmarks.{j}': its cells would have the same names as those of "
                    f"benchmarks.{i} ({ids[i]!r}, agent {shared[0]!r}); tell the entries apart with "
                    f"`label:` (e.g. label: {entries[j].name}-{j}), which names their cells {entries[j].name}:<label>")


def _gguf_file(model: ModelConfig, where: str) -> None:
    """A gguf model's `source` is one GGUF file: not a folder (an HF checkout, say) and not an empty or
    truncated download, which llama.cpp's server would only report in its log once started."""
    must = "a gguf model's source must be a .gguf file (a path, or package:<module>/<file>)"
    plain = None if model.source.startswith("package:") else Path(model.source).expanduser()
    if plain is not None and plain.exists() and not plain.is_file() and not plain.is_dir():
        raise ConfigError(f"{where}: key 'source': {plain} is not a regular file (a device, a pipe or a socket), "
                          f"so it is not a GGUF file; {must}")
    try:
        path = resolve_gguf(model.source)
    except ConfigError as exc:
        raise ConfigError(f"{where}: key 'source': {str(exc).split(': ', 1)[-1]}; {must}") from None
    with open(path, "rb") as fh:
        head = fh.read(len(GGUF_MAGIC))
    if head != GGUF_MAGIC:
        got = "an empty file" if not head else f"a file that does not start with {GGUF_MAGIC!r}"
        raise ConfigError(f"{where}: key 'source': {path} is {got}, not GGUF weights; {must} (download it again)")


def _llama_server(where: str) -> None:
    """The embedded default needs llama.cpp's server binary (built by `make install`), found before any
    server starts rather than as a failed start after the construct and index stages."""
    try:
        llama_server_binary()
    except ConfigError as exc:
        raise ConfigError(f"{where}: key 'server': llama-server: {exc}") from None


def _llama_cpp_python(where: str) -> None:
    """`server: llama-cpp-python` needs the optional extra installed, said at validate with how to install it."""
    try:
        require_llama_cpp_python()
    except ConfigError as exc:
        raise ConfigError(f"{where}: key 'server': llama-cpp-python: {exc}") from None


def check_output_root(exp: ResolvedExperiment, override: str) -> None:
    """`--output-root` given on the command line in place of the file's `output_root`: the same checks, the
    error naming the option (a folder that cannot be written failed the run at its first write, after the
    servers had started)."""
    _output_root(exp, override)
    _request_cache(exp, override)


def _output_root(exp: ResolvedExperiment, override: str | None = None) -> None:
    """Outputs can be written under `output_root` (a read-only folder, or one under /proc, failed the run
    only at its first write, after the servers had started), and it is not a folder of perseval's own."""
    root = override or exp.experiment.output_root
    where = "--output-root" if override else f"{exp.path}: key 'output_root'"
    if problem := files.unwritable(Path(root)):
        raise ConfigError(f"{where}: {root!r}: {problem}; name a folder perseval can create files in")
    if problem := perseval_own(Path(root)):
        raise ConfigError(f"{where}: {root!r} {problem}; name a folder of your own (runs/ in the folder you run "
                          "in is the default)")


# The repository's own folders: an output root there mixes data/, run/, records/ and a request cache into the
# source (or into MLflow's store), and `git clean` or a fresh checkout takes them. Its runs/ is the place.
REPO_FOLDERS = (".ci", ".git", "configs", "docs", "flows", "infra", "mlruns", "perseval", "scripts", "tasks",
                "tests")
OWN_OUTPUTS = "perseval's data/, run/, records/ and request cache"


def perseval_own(root: Path) -> str | None:
    """Why `root` is no place for outputs, or None: it is inside the installed perseval package (a reinstall or
    an upgrade replaces that folder: `run --output-root <checkout>/perseval` wrote 40 paths there), inside a
    virtual environment (recreated at will), or the perseval repository's top folder or one of its own."""
    import perseval

    at = root.expanduser().resolve()
    package = Path(perseval.__file__).resolve().parent
    if at.is_relative_to(package):
        return f"is inside the installed perseval package ({package}): a reinstall or an upgrade would take " \
               f"{OWN_OUTPUTS} with it"
    env = next((p for p in (at, *at.parents) if (p / "pyvenv.cfg").is_file() or (p / "conda-meta").is_dir()), None)
    if env is not None:
        return f"is inside the Python environment {env}: recreating it would take {OWN_OUTPUTS} with it"
    repo = package.parent
    if not ((repo / "pyproject.toml").is_file() and (repo / "flows").is_dir()):  # installed, not a checkout
        return None
    if at == repo:
        return f"is the top folder of the perseval repository: {OWN_OUTPUTS} would mix with its source " \
               f"(use {repo / 'runs'})"
    inside = next((name for name in REPO_FOLDERS if at.is_relative_to(repo / name)), None)
    if inside:
        return f"is inside the perseval repository's {inside}/ folder: {OWN_OUTPUTS} would mix with what it " \
               f"holds (use {repo / 'runs'})"
    return None


def _request_cache(exp: ResolvedExperiment, override: str | None = None) -> None:
    """The request cache's path holds nothing perseval would move aside or write into: no folder (it used to
    be renamed `.damaged-<time>` by the first run), no file of another kind, no other program's database."""
    e = exp.experiment
    path = e.request_cache_path(override)
    problem = foreign(path)
    if problem and e.request_cache:
        raise ConfigError(f"{exp.path}: key 'request_cache': {problem}")
    if problem:
        where = "--output-root" if override else f"{exp.path}: key 'output_root'"
        raise ConfigError(f"{where}: its {DEFAULT_CACHE} (the request cache when `request_cache` is not set): "
                          f"{problem}")


def _tracking_uri(exp: ResolvedExperiment) -> None:
    """A tracking URI MLflow can open, said now rather than when the run tracks, after every other stage."""
    uri = exp.experiment.mlflow.tracking_uri
    allowed = ("sqlite:///<file> (relative) or sqlite:////<absolute file>, postgresql://, mysql://, mssql:// (also "
               "<database>+<driver>://), http://, https://, file:///<folder>, databricks, or a plain folder path")
    scheme = urlsplit(uri).scheme.lower()
    if not uri.strip() or (scheme and scheme.split("+")[0] not in TRACKING_SCHEMES):
        raise ConfigError(f"{exp.path}: key 'mlflow.tracking_uri': {uri!r} is no tracking URI MLflow knows "
                          f"(scheme {scheme or 'none'!r}); use one of {allowed}")
    if scheme.startswith("sqlite") and not uri.startswith(f"{scheme}:///"):
        raise ConfigError(f"{exp.path}: key 'mlflow.tracking_uri': {uri!r} names no database file: an SQLite URI "
                          "is sqlite:///<relative file> or sqlite:////<absolute file>")
