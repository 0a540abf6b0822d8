"""The `perseval` command: run, compare, ui, deploy."""
from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any, ContextManager, NoReturn, Optional

import typer
from rich.console import Console

from perseval_flows.env import apply_offline_env

# The exit codes a script can act on, in `perseval --help` and `perseval run --help`.
EXIT_CODES = ("Exit codes: 0 done; 2 bad input (a file, row or key is named; nothing was started); 3 incomplete "
              "(some outputs or judgments failed and are left out of the scores; the same command redoes only "
              "those); 4 late failure (the run stopped after start-up; finished outputs are kept and the same "
              "command resumes); 5 no score (some benchmark produced no score in any cell: every verdict unscored, "
              "or nothing to judge; the last line names it); 130 interrupted (Ctrl-C: stopped at once, nothing "
              "sent after it, finished outputs and answers kept; the same command resumes).")


def _benchmarks_help() -> str:
    """What `perseval --help` says perseval does, naming every built-in benchmark (from the registry's source
    index: no benchmark module is imported to print help)."""
    from perseval.kernel.registry import manifest_index

    names = sorted(name for (registry, name) in manifest_index() if registry == "BENCHMARKS")
    return f"Evaluate how well LLM agents personalize. Built-in benchmarks: {', '.join(names)}."


HELP = _benchmarks_help()
app = typer.Typer(add_completion=False, no_args_is_help=True, epilog=EXIT_CODES, help=HELP)


def _named_experiment(name: str) -> Path | None:
    """The experiment file called `name` (perseval.experiment.load.experiment_file: configs/experiments/ here,
    then the shipped ones and each benchmark's own); None when there is none."""
    from perseval.core.errors import ConfigError
    from perseval.experiment.load import experiment_file

    try:
        return experiment_file(name, Path("configs"))
    except ConfigError:
        return None


YAML_SUFFIXES = (".yaml", ".yml")


def _file_or_named(value: str) -> Path | None:
    """The experiment `value` names: a file that exists (as the shell completes it) first, else the experiment of
    that name (_named_experiment); when a bare name is both, a note says which was taken and how to get the other
    (a stray ./quickstart file read as the experiment, unsaid, was "expected a mapping" with no hint)."""
    path = Path(value)
    named = _named_experiment(value) if "/" not in value and path.suffix not in YAML_SUFFIXES else None
    if not path.is_file():
        return named
    if named is not None and named.resolve() != path.resolve():
        console.print(f"note: {value!r} is the file {path.resolve()}, read as the experiment; the experiment named "
                      f"{value} is {named}: give that path for it", markup=False, highlight=False, soft_wrap=True)
    return path


def _config_path(value: Path) -> Path:
    """An experiment named as the user knows it: its YAML file's path, or its `name:` (_file_or_named); a bad
    name is refused naming the places looked in."""
    found = _file_or_named(str(value))
    if found is not None:
        return found
    if "/" in str(value) or Path(value).suffix in YAML_SUFFIXES:
        raise typer.BadParameter(f"file {str(value)!r} does not exist: give the experiment YAML's path or its name")
    from perseval.core.suggest import suggestion
    from perseval.experiment.listing import experiment_names

    raise typer.BadParameter(f"file {str(value)!r} does not exist, and no experiment is named so "
                             f"(configs/experiments/{value}.yaml here, the shipped ones, or a benchmark's own): give "
                             f"the experiment YAML's path or its name ({suggestion(str(value), experiment_names())})")


def _run_target(value: str) -> Path | str:
    """run's argument: an experiment (_config_path), or benchmark names (`lamp` or `lamp,iba`), kept as a str."""
    from perseval.experiment.from_cli import is_benchmark_list

    if not Path(value).is_file() and _named_experiment(value) is None and is_benchmark_list(value):
        return value
    return _config_path(Path(value))


CONFIG = typer.Argument(..., metavar="CONFIG", callback=_config_path,
                        help="experiment YAML, or its name (configs/experiments/<name>.yaml)")
console = Console(width=None if sys.stdout.isatty() else 160)  # logs and CI: keep the table readable


def _version(show: bool) -> None:
    if show:
        from importlib.metadata import PackageNotFoundError, version

        try:
            console.print(f"perseval {version('perseval')}")
        except PackageNotFoundError:  # run from a checkout that was never installed
            console.print("perseval (not installed: no version recorded)")
        raise typer.Exit()


@app.callback(help=HELP)
def _main(_: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                 help="print perseval's version and exit")) -> None:
    pass


def _help_as_people_expect() -> None:
    """typer 0.29 prints every flag with a type (`--help <bool>`: a flag takes no value, so its type column
    stays empty) and a required argument in braces (`run [OPTIONS] {CONFIG}`: written `CONFIG`, as in the
    usage line of most commands; an optional one keeps its brackets)."""
    from typer.core import TyperArgument, TyperOption

    typed, usage = TyperOption.display_type_rich, TyperArgument._usage_display_name
    TyperOption.display_type_rich = lambda self, ctx: None if self.is_flag else typed(self, ctx)  # type: ignore
    TyperArgument._usage_display_name = lambda self: (  # type: ignore
        self.display_name_raw + ("..." if self.nargs != 1 else "") if self.required else usage(self))


_help_as_people_expect()


def _error(message: object) -> None:
    """An error as the user sees it: unwrapped (a long path never splits the line), no markup from the text."""
    console.print("[red]error:[/red] ", end="")
    console.print(str(message), markup=False, highlight=False, soft_wrap=True)


INCOMPLETE_EXIT = 3  # the run finished, but some outputs or judgments failed: their cells are incomplete
NO_SCORE_EXIT = 5  # the run finished, but some benchmark entry has no score in any cell


def _print_run(record: Any, wide: bool = False) -> None:
    """The run's output, rendered from its record (perseval.report.views.run) at the terminal's width."""
    from perseval.report.views.run import run_output

    for item in run_output(record, console.width, wide):
        console.print(item, highlight=False)


def _prefect_for(default_root: str, output_root: str | None) -> ContextManager[str]:
    """The Prefect API a flow command uses (a local server if none is configured), quiet logging."""
    os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")
    from perseval_flows.prefect_server import prefect_api  # after the env is set: Prefect reads it on import

    return prefect_api(Path(output_root or default_root) / "logs")


def _listed(value: Optional[str]) -> Optional[list[str]]:
    return None if value is None else [v for v in value.split(",") if v and v != "none"]


@app.command(epilog=EXIT_CODES)
def run(config: str = typer.Argument(..., metavar="CONFIG", callback=_run_target,
                                     help="experiment YAML or its name, or benchmark names: lamp or lamp,iba (their CPU experiment)"),
        model: Optional[str] = typer.Option(None, help="with benchmark names: the backbones (a,b)"),
        judge: Optional[str] = typer.Option(None, help="with benchmark names: the judges (a,b; none for rules only)"),
        agents: Optional[str] = typer.Option(None, help="with benchmark names: every entry's agents (a,b)"),
        retriever: Optional[str] = typer.Option(None, help="with benchmark names: the retrievers (a,b)"),
        controls: Optional[str] = typer.Option(None, help="with benchmark names: the controls (swapped-history, "
                                                          "or none)"),
        print_config: bool = typer.Option(False, "--print-config", help="print the experiment YAML it would run "
                                                                        "and stop"),
        output_root: Optional[str] = typer.Option(None, help="override the experiment's output_root"),
        dask_address: Optional[str] = typer.Option(None, help="an existing Dask scheduler (tcp://host:8786)"),
        summary_json: Optional[Path] = typer.Option(None, help="also write the run summary as JSON here"),
        sample: Optional[int] = typer.Option(None, "--sample", "--limit", min=1,
                                             help="run every benchmark on this many instances "
                                                               "(instead of each entry's sample)"),
        quiet: bool = typer.Option(False, "--quiet", help="no progress bars"),
        wide: bool = typer.Option(False, "--wide", help="print every headline column and the cost per cell (the "
                                                        "summary JSON and headline.md always hold them)")) -> None:
    """Run an experiment end to end: construct, index, serve, run, judge, score, track."""
    apply_offline_env()
    if isinstance(config, str):  # benchmark names: their CPU experiment with the options, written as a file
        config, sample = _from_command_line(config, print_config, sample, output_root, models=_listed(model),
                                            judges=_listed(judge), agents=_listed(agents),
                                            retrievers=_listed(retriever), controls=_listed(controls))
    elif any(v is not None for v in (model, judge, agents, retriever, controls)) or print_config:
        _error("--model, --judge, --agents, --retriever, --controls and --print-config go with benchmark names "
               f"(perseval run lamp --model ...); {config} is an experiment file: edit it")
        raise typer.Exit(2)
    # MLflow's INFO lines (database set-up, the trace queue's flush at exit) are not the run's output; read
    # by MLflow when it is imported, in this process and the workers it starts
    os.environ.setdefault("MLFLOW_LOGGING_LEVEL", "WARNING")
    loading = time.time()
    # fail on a bad file before any server starts (and before mlflow imports)
    exp, plan = _load_or_exit(config, keys=True, output_root=output_root, skip_built=True)
    loaded_s = time.time() - loading
    own_prefect = not os.environ.get("PREFECT_API_URL")  # else the user's server
    summary = _run_flow(config, exp, output_root, dask_address=dask_address, show_progress=not quiet,
                        sample=sample)
    began, ended = summary.pop("window")
    from perseval.pipeline.probes import unprobed
    from perseval.report.record import read_record, record_dir
    from perseval.report.views.run import SMALL_MODEL_WARNING

    folder = record_dir(Path(output_root or exp.experiment.output_root).resolve(), summary["mlflow_run_id"])
    record = read_record(folder)  # the run's record, written by its track stage: what every view prints
    _print_run(record, wide)
    for line in unprobed(plan):  # judge_probes set, but nothing of this entry can be probed: said once
        console.print(f"[yellow]{line}[/yellow]", highlight=False)
    if any(d.kind == "embedded" for d in exp.deployments.values()):
        console.print(f"[yellow]{SMALL_MODEL_WARNING}[/yellow]")
    from perseval.report.views.run import record_lines, stage_line

    for line in record_lines(record, folder, console.width):  # a path is never split mid-word
        console.print(line, highlight=False, soft_wrap=True)
    import psutil

    # the seconds outside the stages, named: `start` from the process's start (imports, loading the file, the
    # local Prefect server) to the flow's preparation, `report` from the flow's end to this line
    # `load`: reading the experiment file, its plan and checking the sources it names (a release's files)
    summary["timings"] = {"start": round(began - psutil.Process().create_time() - loaded_s, 2),
                          "load": round(loaded_s, 2), **summary["timings"],
                          "report": round(time.time() - ended, 2)}
    console.print(stage_line(summary["timings"]), highlight=False)
    console.print(f"LLM requests sent this run: {summary['llm_requests']} ({summary['llm_distinct_requests']} "
                  f"distinct) {summary['requests']}")
    console.print(f"MLflow run id: [bold]{summary['mlflow_run_id']}[/bold] (experiment "
                  f"'{summary['experiment']}'); open the UI with: perseval ui")
    if own_prefect:
        from perseval_flows.prefect_server import IDLE_ENV, idle_seconds

        if (idle := idle_seconds()) > 0:
            console.print(f"the local Prefect server stays up {idle:.0f} s for the next run to reuse "
                          f"({IDLE_ENV}=0: stop it with the run)", highlight=False)
    if summary_json:
        summary_json.write_text(json.dumps(summary, indent=2, default=str))
    incomplete = [c for c in record.cells if c.status.word == "incomplete"]
    if incomplete:
        failed_out = sum(c.status.failed_outputs for c in incomplete)
        failed_judg = sum(c.status.failed_judgments for c in incomplete)
        console.print(f"[red]incomplete:[/red] {len(incomplete)} cell(s) hold {failed_out} failed output(s) and "
                      f"{failed_judg} failed judgment(s), left out of their scores; {_redo_hint(exp, summary)}")
    _exit_without_score(record.cells, INCOMPLETE_EXIT if incomplete else None)


def _from_command_line(names: str, print_config: bool, sample: Optional[int], output_root: Optional[str],
                       **fields: Any) -> tuple[Path, None]:
    """The experiment file of `perseval run <benchmarks> <options>` (perseval.experiment.from_cli), or its YAML
    printed (--print-config); the sample is in the file, so the run passes none."""
    from perseval.core.errors import ConfigError
    from perseval.experiment.from_cli import cli_experiment, experiment_yaml, write_experiment

    try:
        exp = cli_experiment(names.split(","), limit=sample, output_root=output_root, **fields)
    except ConfigError as exc:
        _error(exc)
        raise typer.Exit(2)
    if print_config:
        sys.stdout.write(experiment_yaml(exp))
        raise typer.Exit(0)
    path = write_experiment(exp, exp.get("output_root", "runs"))
    console.print(f"experiment file: {path} (perseval run {path} runs it again)", highlight=False, soft_wrap=True)
    return path, None


def _exit_without_score(cells: list[Any], code: Optional[int]) -> None:
    """The run's last line when some benchmark entry produced no score (exit 5, or `code` when a failure
    explains it: exit 3 redoes the failures); `code` alone otherwise."""
    from perseval.report.record import without_score

    empty = without_score(cells)
    if empty:
        named = "; ".join(f"{entry} (cells {', '.join(statuses)})" for entry, statuses in empty.items())
        console.print(f"[red]no score:[/red] {named}: no cell of it has a score", highlight=False)
    if code is not None or empty:
        raise typer.Exit(code if code is not None else NO_SCORE_EXIT)


def _redo_hint(exp: Any, summary: dict) -> str:
    """What to do about failed rows: run again, unless an endpoint refused the key (HTTP 401/403), which no
    re-run fixes: then which variable of which deployment YAML to fix first."""
    refused = sum(by_status.get("unauthorized", 0) for by_status in summary.get("requests", {}).values())
    if not refused:
        return "run the same command again to redo only those"
    keys = [f"${d.api_key_env} (api_key_env of {exp.file_of('deployments', d.name)})" if d.api_key_env else
            f"api_key_env, unset in {exp.file_of('deployments', d.name)}"
            for d in {d.name: d for d in exp.deployments.values() if d.kind == "openai"}.values()]
    return (f"{refused} request(s) were refused for authentication (HTTP 401/403), which running again cannot "
            f"fix: check the key in {', '.join(keys) or 'the endpoint'}, then run the same command to redo them")


def _run_flow(config: Path, exp: Any, output_root: Optional[str], **kwargs: Any) -> dict:
    """The evaluate flow (whole, or stopped early by `kwargs`), with run's failure handling: a bad input found
    late is exit 2; a server, the disk, Prefect or Dask failing says what, what is kept and how to resume."""
    from perseval.core.errors import ConfigError, InputError
    from perseval_flows.interrupt import stop_on_interrupt

    _quiet_prefect_console()
    root = Path(output_root or exp.experiment.output_root).resolve()
    try:
        if output_root:  # the file's output_root was checked at load; the option's is checked here, still early
            from perseval.experiment.checks import check_output_root

            check_output_root(exp, output_root)
        cache = exp.experiment.request_cache_path(output_root)
        with stop_on_interrupt(root, sys.argv[1:], cache), _prefect_for(exp.experiment.output_root, output_root):
            from perseval_flows.runtime import run_experiment

            return run_experiment(exp, output_root=output_root, **kwargs)  # the experiment resolved once, above
    except (InputError, ConfigError) as exc:
        _error(exc)
        raise typer.Exit(2)
    except Exception as exc:
        _late_failure(exc, root)


def _quiet_prefect_console() -> None:
    """Prefect prints a failed flow run's traceback on the console, in this process and in each Dask
    worker; `run` prints its own few lines instead (the traceback goes to a log file, and every log line
    stays in the Prefect API). Set before Prefect is imported, so the workers inherit it."""
    from perseval_flows.failure import TRACEBACK_ENV
    from perseval_tasks.own_warnings import OWN_WARNINGS_ENV, show_perseval_warnings

    if not os.environ.get(TRACEBACK_ENV):
        os.environ.setdefault("PREFECT_LOGGING_HANDLERS_CONSOLE_LEVEL", "CRITICAL")
        os.environ[OWN_WARNINGS_ENV] = "1"
        show_perseval_warnings()


def _late_failure(exc: Exception, root: Path) -> NoReturn:
    """A run that stopped after start-up: a few lines, no traceback (it is in a log), exit code 4."""
    from perseval_flows.failure import LATE_FAILURE_EXIT, failure_report

    head, *rest = failure_report(exc, root, sys.argv[1:])
    _error(head)
    for line in rest:
        console.print(line, markup=False, highlight=False, soft_wrap=True)
    raise typer.Exit(LATE_FAILURE_EXIT)


def _load_or_exit(config: Path, keys: bool = False, output_root: Optional[str] = None,
                  skip_built: bool = False) -> "Any":
    """The resolved experiment and its plan, or one line per problem and exit code 2 (no server started).

    The benchmark sources are read here too, so a bad release row is reported in seconds, not after the
    Prefect server and the Dask cluster started and the construct task failed. `skip_built` (a run): not a
    source whose data the output root already holds, as its key names the files' sizes and times, so they
    read whole then (reading 20,000 LaMP questions again was most of a cached re-run's start)."""
    from perseval.core.errors import PersevalError
    from perseval.experiment.checks import check_keys
    from perseval.experiment.load import load_experiment, source_problems
    from perseval.pipeline.freshness import data_done
    from perseval.pipeline.plan import make_plan

    from perseval_flows.prefect_server import idle_seconds

    try:
        idle_seconds()  # the environment's setting too: a bad one stops here, not after the run
        exp = load_experiment(config)
        if keys:  # validate and run: every endpoint's key is in the environment
            check_keys(exp)
        plan = make_plan(exp)
    except PersevalError as exc:
        _error(exc)
        raise typer.Exit(2)
    root = str(Path(output_root or exp.experiment.output_root).resolve())
    built = {i for i, unit in enumerate(plan.data) if skip_built and data_done(root, unit)}
    problems = source_problems(exp, skip=built)
    for problem in problems:
        _error(problem)
    if problems:
        raise typer.Exit(2)
    return exp, plan


@app.command()
def validate(config: Path = CONFIG) -> None:
    """Check an experiment file and everything it names (no server is started)."""
    apply_offline_env()
    exp, plan = _load_or_exit(config, keys=True)
    console.print(f"ok: {config} — {len(plan.data)} benchmark(s), {len(plan.runs())} run(s), "
                  f"{len(plan.cells)} cell(s), models {sorted(exp.models)}")


@app.command()
def show(config: Path = CONFIG,
         as_json: bool = typer.Option(False, "--json", help="print JSON (what tests and protocol sheets read)"),
         path: Optional[str] = typer.Option(None, help="only the value at this path, keys joined by '/' (e.g. "
                                                        "benchmarks/iba/agents/iba-rag/params/top_k)")) -> None:
    """Print the effective settings of every cell after every override: what a run will send (starts nothing)."""
    import yaml

    from perseval.report.show import MISSING, at_path, effective_settings

    apply_offline_env()
    exp, plan = _load_or_exit(config)
    settings = effective_settings(exp, plan)
    if path is not None:
        settings = at_path(settings, path.strip("/"))
        if settings is MISSING:
            _error(f"--path {path}: no such setting in {config}; `perseval show {config}` prints every path")
            raise typer.Exit(2)
    typer.echo(json.dumps(settings, indent=2) if as_json else yaml.safe_dump(settings, sort_keys=False))


@app.command()
def construct(config: Path = CONFIG,
              output_root: Optional[str] = typer.Option(None, help="override the experiment's output_root"),
              dask_address: Optional[str] = typer.Option(None, help="an existing Dask scheduler")) -> None:
    """Build the experiment's benchmark data only: the evaluate flow's construct stage, under the same data
    keys `perseval run` uses (so a later run reuses it). Template or LLM mode is the benchmark's
    `params.construction` in the YAML."""
    apply_offline_env()
    exp, _ = _load_or_exit(config)
    summary = _run_flow(config, exp, output_root, dask_address=dask_address, stop_after="construct")
    for key, manifest in summary["data"].items():
        console.print(f"{manifest['benchmark']}: data key {key}, {manifest['n_instances']} instances, "
                      f"{manifest['n_documents']} documents")


@app.command()
def stats(config: Path = CONFIG,
          output_root: Optional[str] = typer.Option(None, help="override the experiment's output_root"),
          out_dir: Optional[Path] = typer.Option(None, help="also write each table as CSV and Markdown here")) -> None:
    """Dataset statistics of every benchmark in CONFIG (built or loaded first, as `perseval construct`)."""
    apply_offline_env()
    exp, plan = _load_or_exit(config)
    _run_flow(config, exp, output_root, stop_after="construct", show_progress=False)
    from perseval.experiment.components import make_benchmark
    from perseval.pipeline.stages import load_documents, load_instances, write_artifact
    from perseval.report.views.frames import frame_table

    root = output_root or exp.experiment.output_root
    for unit in plan.data:
        bench = make_benchmark(unit.entry.name, unit.params)
        tables = bench.stats(load_instances(root, unit.key), load_documents(root, unit.key))
        for name, table in tables.items():
            console.print()
            console.print(frame_table(table, f"{unit.name}: {name}"))
            if out_dir:
                (out_dir / unit.name).mkdir(parents=True, exist_ok=True)
                write_artifact(out_dir / unit.name, name, table)


@app.command("judge-check")
def judge_check(config: Path = typer.Argument(..., exists=True, dir_okay=False, help="experiment YAML (already run)"),
                labels: Optional[Path] = typer.Argument(None, exists=True, dir_okay=False,
                                                        help="human labels CSV (docs/judge-labels.md); omitted: "
                                                             "the data's own (Bespoke meta-test)"),
                judge_labels: Optional[Path] = typer.Option(None, exists=True, dir_okay=False,
                                                            help="the judge's labels in the same layout, instead "
                                                                 "of the run's stored judgments"),
                output_root: Optional[str] = typer.Option(None, help="override the experiment's output_root"),
                out: Optional[Path] = typer.Option(None, help="also write the table here (.csv)"),
                log: bool = typer.Option(True, help="log a 'judge-check' run to the experiment's MLflow")) -> None:
    """A judge against human labels, per criterion: Pearson, Spearman, quadratic-weighted kappa and
    Krippendorff's alpha with user-resampled bootstrap intervals, and the confusion matrices."""
    from perseval.core.errors import PersevalError
    from perseval.report.analyses.judge_agreement import judge_agreement
    from perseval.report.sink.validity import log_validity
    from perseval.report.views.frames import agreement_markdown

    apply_offline_env()
    exp, _ = _load_or_exit(config)
    if output_root:
        exp.experiment.output_root = output_root
    try:
        table, matrices = judge_agreement(exp, labels, judge_labels, seed=exp.experiment.seed)
    except PersevalError as exc:
        _error(exc)
        raise typer.Exit(2)
    console.print(agreement_markdown(table))
    for key, matrix in matrices.items():
        console.print(f"\nconfusion {key} (rows: human, columns: judge)\n{matrix.to_markdown()}")
    if out:
        table.to_csv(out, index=False)
    if log:
        run_id = log_validity(exp.experiment.mlflow, exp.experiment.name, table, matrices)
        console.print(f"MLflow run id: {run_id}")


@app.command()
def compare(runs: Optional[list[str]] = typer.Argument(None, help="MLflow run ids (parent runs) and/or experiments "
                                                               "(MLflow name, file, or the file's name:); default: "
                                                               "perseval-quickstart"),
            latest: int = typer.Option(2, help="how many recent parent runs of each named experiment"),
            out: Optional[Path] = typer.Option(None, help="also write the table here (.md or .csv)"),
            cost: bool = typer.Option(False, "--cost", help="also each run's tokens in/out and USD (when priced) "
                                                             "per cell"),
            baseline: Optional[str] = typer.Option(None, help="also compare, within each run, every cell with the "
                                                              "cell of this agent (e.g. iba-no-history)"),
            level: float = typer.Option(0.95, min=0.5, max=0.999, help="confidence level of the intervals"),
            detect: Optional[float] = typer.Option(None, help="also the users needed to detect a difference of "
                                                              "this many points (80% power, α 0.05), each "
                                                              "comparison taken as a pilot"),
            between: Optional[tuple[str, str]] = typer.Option(
                None, metavar="CELL_A CELL_B", help="two cells, named as the headline names them (e.g. iba-rag "
                "iba-no-history: paired under each judge; or full names): their instances side by side in each "
                "run, those that differ most first, with both scores and trace ids"),
            instances: int = typer.Option(0, help="how many instances to list (default 10 with --between; "
                                                  "without it, N > 0 lists them per cell whose key changed)"),
            ui_url: str = typer.Option("http://127.0.0.1:5000", help="the MLflow UI the trace links point at"),
            tracking_uri: str = typer.Option("sqlite:///mlruns/mlflow.db")) -> None:
    """Headline score [CI] of every cell, side by side for the runs named (oldest first; an experiment's re-run
    that repeats the run before it is skipped), with the change from the first (and with --cost what each cell
    cost in each run); then each difference with its user-clustered interval, a Holm-corrected p and whether it
    is significant at the n it rests on (paired when the same instances); with --between or --instances, the
    instances that differ most with both scores and trace ids, to open side by side in `perseval ui`. Every
    figure is read from the runs' records."""
    from perseval.report import commands

    specs = [_mlflow_experiment(s) for s in runs or ["perseval-quickstart"]]  # a bad name: before the store's check
    _command(commands.compare, console, _store(tracking_uri), specs, latest=latest, out=out, cost=cost,
             baseline=baseline, level=level, detect=detect, between=between, instances=instances, ui=ui_url)


def _store(tracking_uri: str) -> Any:
    """A client of the MLflow store that compare and samples read (a relative sqlite path from here), creating
    nothing: a database that is not there is one line and exit 2. mlflow's module functions read it too."""
    import mlflow
    from mlflow.tracking import MlflowClient

    from perseval.report.store_paths import sqlite_path

    uri = tracking_uri
    db = sqlite_path(tracking_uri)
    if db is not None:  # read, never created: MLflow would make an empty database (and ./mlruns/artifacts)
        if not db.is_file():
            _error(f"--tracking-uri {tracking_uri}: no MLflow database at {db}; run this in the folder the runs were "
                   "made in, or give their database's path (sqlite:////<absolute path>)")
            raise typer.Exit(2)
        uri = f"sqlite:///{db}"
    mlflow.set_tracking_uri(uri)
    return MlflowClient(uri)


def _command(fn: Any, *args: Any, **kwargs: Any) -> None:
    """A report command (perseval.report.commands); its CommandError as one line and its exit code."""
    from perseval.report.commands import CommandError

    try:
        fn(*args, **kwargs)
    except CommandError as exc:
        (_error if exc.code == 2 else console.print)(str(exc))
        raise typer.Exit(exc.code)


def _mlflow_experiment(spec: str) -> str:
    """An experiment named as the user knows it: the YAML file's path or its `name:` (the file
    configs/experiments/<name>.yaml) -> the MLflow experiment it logs to; anything else (an MLflow experiment
    name, a run id) as given."""
    from perseval.core.errors import ConfigError
    from perseval.experiment.config import read_yaml

    is_experiment = Path(spec).suffix in YAML_SUFFIXES or ("/" not in spec and _named_experiment(spec) is not None)
    path = _file_or_named(spec) if is_experiment else None  # the same file `validate <spec>` reads
    if path is None:
        return spec
    try:
        data = read_yaml(path)
    except ConfigError as exc:
        _error(exc)
        raise typer.Exit(2)
    mlflow = data.get("mlflow")
    return str((mlflow if isinstance(mlflow, dict) else {}).get("experiment") or "perseval")


@app.command()
def samples(run: Optional[str] = typer.Argument(None, metavar="[RUN]", help="a parent run id (8+ characters) or an "
                                                "experiment (its MLflow name, its file or the file's name:; its latest "
                                                "finished run); default: the latest run in the store"),
            cell: Optional[str] = typer.Argument(None, metavar="[CELL]", help="a cell as the headline names it "
                                                 "(iba-rag/iba.slots, apeb-direct) or in full; omitted: the run's cells"),
            sort: Optional[str] = typer.Option(None, help="order by a field, '-' first for descending (-score)"),
            where: Optional[list[str]] = typer.Option(None, help="keep instances where FIELD OP VALUE (score<50, "
                                                                "status=unscored, user=u3, output~tofu); repeatable"),
            limit: Optional[int] = typer.Option(None, min=1, help="at most this many instances"),
            brief: bool = typer.Option(False, "--brief", help="verdict marks only, no prompt, answer or reasons"),
            html: Optional[Path] = typer.Option(None, help="also write the instances as a sortable HTML page here"),
            as_json: bool = typer.Option(False, "--json", help="print the cell as the run's record holds it (its "
                                                              "estimate and the instances chosen, with their "
                                                              "messages and answers) as JSON"),
            ui_url: str = typer.Option("http://127.0.0.1:5000", help="the MLflow UI the trace links point at"),
            tracking_uri: str = typer.Option("sqlite:///mlruns/mlflow.db")) -> None:
    """Every instance of one cell of a run, from its record and per-sample log: its user, score, status, the
    first lines of its prompt, its answer, each judge verdict with its reason, and a link that opens its trace
    in `perseval ui`. With no CELL, the run's cells. Fields for --sort and --where: instance, repeat, user,
    group, score, status, verdicts, passed, unscored, trace, output."""
    from perseval.report import commands
    from perseval.report.sink.runs import latest_parent

    client = _store(tracking_uri)
    spec = _mlflow_experiment(run) if run else latest_parent(client)
    if spec is None:
        _error("no perseval run in the MLflow store: run `perseval run` first, or pass --tracking-uri")
        raise typer.Exit(2)
    _command(commands.samples, console, client, spec, cell, sort=sort, where=where or (), limit=limit, brief=brief,
             html=html, as_json=as_json, ui=ui_url)


@app.command("list")
def list_(kind: str = typer.Argument("benchmarks", help="benchmarks, agents, judges, models, deployments, "
                                                        "experiments or retrievers")) -> None:
    """What exists: one line per name, with what it is and where its YAML lives (read from the manifests and
    the config folders; nothing is imported)."""
    from perseval.core.errors import ConfigError
    from perseval.experiment.listing import listing

    try:
        entries = listing(kind)
    except ConfigError as exc:
        _error(exc)
        raise typer.Exit(2)
    for e in entries:
        console.print(f"{e.name}  {e.what}  ({e.where})", markup=False, highlight=False, soft_wrap=True)


@app.command()
def ui(port: int = typer.Option(5000, min=1, max=65535, help="the port on 127.0.0.1 the UI listens on"),
       tracking_uri: str = typer.Option("sqlite:///mlruns/mlflow.db", help="the MLflow store to open (as an "
                                        "experiment's mlflow.tracking_uri; a relative sqlite path is read from "
                                        "here)"),
       create: bool = typer.Option(False, "--create", help="start on an empty store where TRACKING_URI has none")) -> None:
    """Start the MLflow UI on 127.0.0.1."""
    from perseval.experiment.config import MLflowSettings
    from perseval.llm.embedded import HOST
    from perseval.report.store_paths import resolve_tracking, sqlite_path  # no MLflow import before the server's

    db = sqlite_path(tracking_uri)
    if db is not None and not db.is_file() and not create:
        _error(f"no MLflow store at {db} (from --tracking-uri {tracking_uri}): run `perseval run` in this folder "
               "first, point --tracking-uri at the experiment's store, or pass --create to start an empty one")
        raise typer.Exit(2)
    uri, artifacts = resolve_tracking(MLflowSettings(tracking_uri=tracking_uri))
    console.print(f"MLflow store: {uri} (artifacts {artifacts}){' (new, empty)' if db and not db.is_file() else ''}",
                  soft_wrap=True)
    console.print(f"starting the MLflow UI on {HOST}:{port}; it says what it waits for until it answers (Ctrl-C "
                  "stops it)", highlight=False)
    from perseval_flows import ui as ui_server

    ui_server.start(uri, artifacts, port)


@app.command()
def deploy(config: Path = CONFIG,
           cron: str = typer.Option(..., help="cron expression, e.g. '0 2 * * *' for nightly at 02:00"),
           name: Optional[str] = typer.Option(None, help="deployment name (default: the experiment name)"),
           timezone: str = typer.Option("UTC"),
           pool: str = typer.Option("perseval", help="the process work pool a worker polls (created if missing)"),
           sample: Optional[int] = typer.Option(None, min=1, help="run every benchmark on this many instances"),
           serve: bool = typer.Option(False, "--serve", help="no worker: execute the scheduled runs here (blocks)")) -> None:
    """Register the evaluate flow for CONFIG as a scheduled Prefect deployment (needs PREFECT_API_URL).

    A worker on the work pool runs it (`infra/prefect/worker.sh`); with --serve this process does."""
    apply_offline_env()
    exp, _ = _load_or_exit(config)
    from perseval_flows import deploy as deploy_mod  # Prefect: only once the experiment and its sources are good

    dep_name = name or exp.experiment.name
    if serve:
        console.print(f"serving deployment {dep_name!r} on '{cron}' ({timezone}); Ctrl-C stops it")
        deploy_mod.serve(config, cron, dep_name, timezone, sample)
        return
    dep_id = deploy_mod.register(config, cron, dep_name, timezone, pool, sample)
    console.print(f"deployment {dep_name!r} registered (id {dep_id}) on work pool {pool!r} with schedule "
                  f"'{cron}' ({timezone}). Start a worker for it with `infra/prefect/worker.sh {pool}`; "
                  f"`prefect deployment run 'perseval-scheduled-evaluate/{dep_name}'` runs it now.")


class _Host:
    """What a benchmark's own commands borrow from this command line (perseval.kernel.commands.CommandHost)."""

    console = console
    error = staticmethod(_error)
    load = staticmethod(_load_or_exit)
    offline = staticmethod(apply_offline_env)

    @staticmethod
    def construct(config: Path, exp: Any, output_root: Optional[str]) -> None:
        _run_flow(config, exp, output_root, stop_after="construct", show_progress=False)


def _mount_benchmark_commands() -> None:
    """`perseval <benchmark> <command>`: each benchmark's own commands, from its folder (components.yaml
    `commands:`) or an installed plugin (register_commands); this file names no benchmark."""
    import importlib

    from perseval.kernel.commands import PLUGIN_COMMANDS
    from perseval.kernel.registry import command_modules, load_entry_points

    load_entry_points()
    factories = {name: importlib.import_module(module).commands for name, module in command_modules().items()}
    for name, factory in sorted({**factories, **PLUGIN_COMMANDS}.items()):
        app.add_typer(factory(_Host()), name=name)


_mount_benchmark_commands()

if __name__ == "__main__":
    app()
