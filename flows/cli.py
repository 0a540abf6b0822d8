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


def _config_path(value: Path) -> Path:
    """An experiment named as the user knows it: its YAML file's path, or its `name:` (_named_experiment);
    a bad name is refused naming the places looked in."""
    path = Path(value)
    if path.is_file():
        return path
    if "/" in str(value) or path.suffix in (".yaml", ".yml"):
        raise typer.BadParameter(f"file {str(value)!r} does not exist: give the experiment YAML's path or its name")
    named = _named_experiment(str(value))
    if named is not None:
        return named
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


def _print_headline(rows: list[Any], wide: bool = False) -> None:
    """The headline as the terminal shows it: compact (fits 100 columns; perseval.report.tables) or, with
    `wide`, every column and the cost per cell. The summary JSON and headline.md keep every field."""
    from perseval.report.headline import headline_note
    from perseval.report.probes import NOT_INTERPRETABLE, discrimination_lines
    from perseval.report.tables import controls_table, cost_line, cost_table, headline_tables, wide_table

    for table in [wide_table(rows)] if wide else headline_tables(rows, console.width):
        console.print(table)
    console.print(headline_note(rows, wide), markup=False, highlight=False)
    controls = controls_table(rows, wide)
    if controls is not None:
        console.print(controls)
    lines = discrimination_lines(rows)
    if lines:
        console.print("Judge check on answers of known verdict (judge_probes):")
    for line in lines:
        colour = "red" if NOT_INTERPRETABLE in line else "green"
        console.print(f"[{colour}]  {line}[/{colour}]", highlight=False)
    if wide and rows and "tokens_in" in rows[0]:
        console.print(cost_table(rows))
    elif (line := cost_line(rows)) is not None:
        console.print(line, highlight=False)


def stage_line(timings: dict[str, float]) -> str:
    """"stage seconds: construct 1.2, index 0.4, ..., total 157.7": each stage's wall seconds, in order."""
    parts = [f"{stage} {seconds:.1f}" for stage, seconds in timings.items() if isinstance(seconds, (int, float))]
    total = sum(v for v in timings.values() if isinstance(v, (int, float)))
    return "stage seconds: " + ", ".join(parts) + f" (sum {total:.1f})"


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
    exp, plan = _load_or_exit(config, output_root, skip_built=True)
    loaded_s = time.time() - loading
    own_prefect = not os.environ.get("PREFECT_API_URL")  # else the user's server
    summary = _run_flow(config, exp, output_root, dask_address=dask_address, show_progress=not quiet,
                        sample=sample)
    began, ended = summary.pop("window")
    from perseval.report.headline import SMALL_MODEL_WARNING

    from perseval.report.record import read_record, record_dir
    from perseval.report.rows import HeadlineRow

    summary["headline"] = [HeadlineRow.of(r).as_dict() for r in summary["headline"]]  # the keys it always had
    folder = record_dir(Path(output_root or exp.experiment.output_root).resolve(), summary["mlflow_run_id"])
    record = read_record(folder)  # the run's record, written by its track stage: what every view prints
    rows = record.headline_rows()
    _print_headline(rows, wide)
    from perseval.report.probes import unprobed

    for line in unprobed(plan):  # judge_probes set, but nothing of this entry can be probed: said once
        console.print(f"[yellow]{line}[/yellow]", soft_wrap=True, highlight=False)
    if any(d.kind == "embedded" for d in exp.deployments.values()):
        console.print(f"[yellow]{SMALL_MODEL_WARNING}[/yellow]")
    console.print(f"record: {folder / 'record.json'}" + (f" (results computed by run {record.computed_by[:8]}; "
                  "this run reused its cached outputs)" if record.computed_by != record.run_id else ""),
                  highlight=False, soft_wrap=True)
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
    incomplete = [r for r in rows if r.status == "incomplete"]
    if incomplete:
        failed_out = sum(r.failed_outputs for r in incomplete)
        failed_judg = sum(r.failed_judgments for r in incomplete)
        console.print(f"[red]incomplete:[/red] {len(incomplete)} cell(s) hold {failed_out} failed output(s) and "
                      f"{failed_judg} failed judgment(s), left out of their scores; {_redo_hint(exp, summary)}",
                      soft_wrap=True)
    _exit_without_score(rows, INCOMPLETE_EXIT if incomplete else None)


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


def _exit_without_score(rows: list[Any], code: Optional[int]) -> None:
    """The run's last line when some benchmark entry produced no score (exit 5, or `code` when a failure
    explains it: exit 3 redoes the failures); `code` alone otherwise."""
    from perseval.report.rows import without_score

    empty = without_score(rows)
    if empty:
        named = "; ".join(f"{entry} (cells {', '.join(statuses)})" for entry, statuses in empty.items())
        console.print(f"[red]no score:[/red] {named}: no cell of it has a score", soft_wrap=True, highlight=False)
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
        with stop_on_interrupt(root, sys.argv[1:]), _prefect_for(exp.experiment.output_root, output_root):
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


def _load_or_exit(config: Path, output_root: Optional[str] = None, skip_built: bool = False) -> "Any":
    """The resolved experiment and its plan, or one line per problem and exit code 2 (no server started).

    The benchmark sources are read here too, so a bad release row is reported in seconds, not after the
    Prefect server and the Dask cluster started and the construct task failed. `skip_built` (a run): not a
    source whose data the output root already holds, as its key names the files' sizes and times, so they
    read whole then (reading 20,000 LaMP questions again was most of a cached re-run's start)."""
    from perseval.core.errors import PersevalError
    from perseval.experiment.load import load_experiment, source_problems
    from perseval.pipeline.freshness import data_done
    from perseval.pipeline.plan import make_plan

    from perseval_flows.prefect_server import idle_seconds

    try:
        idle_seconds()  # the environment's setting too: a bad one stops here, not after the run
        exp = load_experiment(config)
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
    exp, plan = _load_or_exit(config)
    console.print(f"ok: {config} — {len(plan.data)} benchmark(s), {len(plan.runs())} run(s), "
                  f"{len(plan.cells)} cell(s), models {sorted(exp.models)}")


@app.command()
def show(config: Path = CONFIG,
         as_json: bool = typer.Option(False, "--json", help="print JSON (what tests and protocol sheets read)")) -> None:
    """Print the effective settings of every cell after every override: what a run will send (starts nothing)."""
    import yaml

    from perseval.report.show import effective_settings

    apply_offline_env()
    exp, plan = _load_or_exit(config)
    settings = effective_settings(exp, plan)
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
    from perseval.report.tables import frame_table

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
    from perseval.report.judge_check import format_table, judge_check as check, log_validity

    apply_offline_env()
    exp, _ = _load_or_exit(config)
    if output_root:
        exp.experiment.output_root = output_root
    try:
        table, matrices = check(exp, labels, judge_labels, seed=exp.experiment.seed)
    except PersevalError as exc:
        _error(exc)
        raise typer.Exit(2)
    console.print(format_table(table))
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
            tracking_uri: str = typer.Option("sqlite:///mlruns/mlflow.db")) -> None:
    """Headline score [CI] of every cell, side by side for the runs named (oldest first; an experiment's re-run
    that repeats the run before it is skipped), with the change from the first (and
    with --cost what each cell cost in each run); then each difference with its user-clustered interval, a
    Holm-corrected p and whether it is significant at the n it rests on (paired when the same instances);
    with --between or --instances, the instances that differ most with both scores and trace ids, to open
    side by side in `perseval ui`."""
    from mlflow.tracking import MlflowClient

    from perseval.report.run_compare import scored_cells
    from perseval.report.samples import quiet_artifacts
    from perseval.report.tables import compare_tables
    from perseval.report.tracking import compare_frame

    quiet_artifacts()
    client, parents = _parents_or_exit(runs or ["perseval-quickstart"], latest, tracking_uri)
    parents = _readable_or_exit(client, parents)
    pairs = _between_or_exit(client, parents, between) if between else None  # a bad name: before any output
    console.print("runs (oldest first): " + "; ".join(f"{p.info.run_name} {p.info.run_id[:8]}" for p in parents),
                  highlight=False)
    if pairs is not None:  # only the instances of the two cells, once per run
        _print_pairs(client, pairs, instances or 10)
        return
    for table in compare_tables(scored_cells(client, parents, cost), parents, cost):
        console.print(table)
    if out:
        frame = compare_frame(client, parents, cost)
        # scores to 0.1, tokens whole, dollars to 0.0001 (a small cell costs cents)
        formats = [".1f"] + [".4f" if c.startswith("cost_usd") else ".0f" if c.startswith("tokens") else ".1f"
                             for c in frame.columns]
        out.write_text(frame.to_csv() if out.suffix == ".csv" else frame.to_markdown(floatfmt=formats) + "\n")
        console.print(f"written to {out}")
    _print_differences(client, parents, baseline, level, out, detect)
    if instances:
        _print_instance_differences(client, parents, instances)


def _parents_or_exit(specs: list[str], latest: int, tracking_uri: str,
                     announce: bool = True) -> tuple[Any, list[Any]]:
    from mlflow.tracking import MlflowClient

    from perseval.experiment.config import MLflowSettings
    from perseval.report.tracking import parent_runs, resolve_tracking

    import mlflow

    uri, _ = resolve_tracking(MLflowSettings(tracking_uri=tracking_uri))
    mlflow.set_tracking_uri(uri)  # what reads traces through mlflow's module functions reads this store too
    client = MlflowClient(uri)
    try:
        found = parent_runs(client, [_mlflow_experiment(spec) for spec in specs], latest)
    except ValueError as exc:
        _error(exc)
        raise typer.Exit(2)
    if not found.runs:
        console.print(f"no finished runs for {specs}")
        raise typer.Exit(1)
    for r in found.skipped if announce else ():  # a cached re-run: the same results as the run before it
        console.print(f"skipped {r.info.run_id[:8]} ({r.info.run_name}): the same results as the run before it, "
                      f"computed by {r.data.tags.get('perseval.computed_by', '?')[:8]} (name it to include it)",
                      highlight=False)
    return client, found.runs


def _readable_or_exit(client: Any, parents: list[Any]) -> list[Any]:
    """The runs whose record can be read (or that were logged before records); each other one skipped with
    one line saying what is wrong with its record; exit 2 when none is left."""
    from perseval.report.record import RecordError, download_record

    kept = []
    for p in parents:
        try:
            download_record(client, p.info.run_id)
        except RecordError as exc:
            console.print(f"skipped {p.info.run_id[:8]} ({p.info.run_name}): {exc}", highlight=False,
                          soft_wrap=True)
            continue
        kept.append(p)
    if not kept:
        _error("no run named has a record that can be read")
        raise typer.Exit(2)
    return kept


def _mlflow_experiment(spec: str) -> str:
    """An experiment named as the user knows it: the YAML file's path or its `name:` (the file
    configs/experiments/<name>.yaml) -> the MLflow experiment it logs to; anything else (an MLflow experiment
    name, a run id) as given."""
    import yaml

    for path in (Path(spec), _named_experiment(spec) if "/" not in spec else None):
        if path is not None and path.suffix in (".yaml", ".yml") and path.is_file():
            data = yaml.safe_load(path.read_text()) or {}
            return str((data.get("mlflow") or {}).get("experiment") or "perseval")
    return spec


def _children(client: Any, parent: Any) -> list[Any]:
    return client.search_runs([parent.info.experiment_id], max_results=5000,
                              filter_string=f"tags.mlflow.parentRunId = '{parent.info.run_id}'")


def _between_or_exit(client: Any, parents: list[Any], between: tuple[str, str]) -> list[tuple[Any, Any]]:
    """The cell pairs `--between` names in every run, or the reason it names none (exit 2, nothing printed)."""
    from perseval.report.samples import resolve_pairs

    try:
        return [(p, *pair) for p in parents for pair in resolve_pairs(_children(client, p), *between)]
    except ValueError as exc:
        _error(exc)
        raise typer.Exit(2)


def _print_differences(client: Any, parents: list, baseline: Optional[str], level: float, out: Optional[Path],
                       detect: Optional[float]) -> None:
    """The differences between runs (and to `baseline` within each run) with their error bars."""
    from perseval.metrics.settings import StatisticsSettings
    from perseval.report.run_compare import differences, run_pairs, shown, within_pairs
    from perseval.report.tables import frame_table

    pairs = run_pairs(client, parents)
    for parent in parents if baseline else []:
        pairs += within_pairs(client, parent, baseline)
    diffs = differences(pairs, StatisticsSettings(level=level), detect)
    if diffs.empty:
        return
    console.print(frame_table(shown(diffs), f"Differences ({100 * level:g}% user-clustered intervals; p "
                                            f"Holm-corrected across the {int(diffs['p (Holm)'].notna().sum())} "
                                            "comparisons below)"))
    if out:
        path = out.with_name(f"{out.stem}_differences{out.suffix}")
        path.write_text(diffs.to_csv(index=False) if out.suffix == ".csv" else shown(diffs).to_markdown() + "\n")
        console.print(f"written to {path}")


def _print_pairs(client: Any, pairs: list[tuple[Any, Any, Any]], n: int) -> None:
    """Per (parent run, cell A, cell B): the two cells' instances side by side, those that differ most first,
    with both trace ids, under the run's name."""
    from perseval.report.samples import cell_name, read_samples, side_by_side, trace_url
    from perseval.report.tables import pair_table

    for parent, a, b in pairs:
        rows = side_by_side(read_samples(client, a), read_samples(client, b))
        differ = sum(r.gap > 0 for r in rows)
        title = (f"run {parent.info.run_id[:8]} ({parent.info.run_name}): A = {cell_name(a)} vs B = {cell_name(b)}: "
                 f"{differ} of {len(rows)} instance(s) differ; the first {min(n, len(rows))}")
        console.print(pair_table(title, rows[:n]))
    if pairs:
        console.print("open a trace in `perseval ui`: " + trace_url("http://127.0.0.1:5000",
                      pairs[0][1].info.experiment_id, "<trace id>"), soft_wrap=True)


def _print_instance_differences(client: Any, parents: list[Any], n: int) -> None:
    """Each cell whose score key changed between the first run and a later one: its instances side by side."""
    from perseval.report.traces import cell_pairs

    pairs = cell_pairs(client, parents, None)
    if not pairs:
        console.print("no cell changed between the runs: no instance to set side by side")
    by_id = {p.info.run_id: p for p in parents}  # each pair under the later run it compares
    _print_pairs(client, [(by_id[b.data.tags["mlflow.parentRunId"]], a, b) for a, b in pairs], n)


@app.command()
def samples(run: str = typer.Argument(..., metavar="RUN", help="a parent run id (8+ characters) or an experiment "
                                                              "(its MLflow name, its file or the file's name:; "
                                                              "its latest finished run)"),
            cell: str = typer.Argument(..., metavar="CELL", help="a cell as the headline names it (iba-rag/iba.slots, "
                                                                "apeb-direct) or in full"),
            sort: Optional[str] = typer.Option(None, help="order by a field, '-' first for descending (-score)"),
            where: Optional[list[str]] = typer.Option(None, help="keep instances where FIELD OP VALUE (score<50, "
                                                                "status=unscored, user=u3, output~tofu); repeatable"),
            limit: Optional[int] = typer.Option(None, min=1, help="at most this many instances"),
            brief: bool = typer.Option(False, "--brief", help="verdict marks only, no rationales"),
            html: Optional[Path] = typer.Option(None, help="also write the instances as a sortable HTML page here"),
            as_json: bool = typer.Option(False, "--json", help="print the cell as the run's record holds it (its "
                                                              "estimate and the instances chosen) as JSON"),
            ui_url: str = typer.Option("http://127.0.0.1:5000", help="the MLflow UI the trace links point at"),
            tracking_uri: str = typer.Option("sqlite:///mlruns/mlflow.db")) -> None:
    """Every instance of one cell of a run: its user, score, status, each judge verdict with its rationale, and
    its trace id (open it in `perseval ui`). Fields for --sort and --where: instance, repeat, user, group,
    score, status, verdicts, passed, unscored, trace, output."""
    from perseval.report.samples import choose, read_samples, resolve_cell, samples_html, trace_url
    from perseval.report.tables import samples_table

    client, parents = _parents_or_exit([run], 1, tracking_uri, announce=False)  # its latest distinct results
    try:
        chosen = resolve_cell(_children(client, parents[0]), cell)
        choose([], where or (), sort, limit)  # a bad --where or --sort: refused before anything is read
    except ValueError as exc:
        _error(exc)
        raise typer.Exit(2)
    every = read_samples(client, chosen)
    shown = choose(every, where or (), sort, limit)
    name = chosen.data.tags.get("perseval.cell", chosen.info.run_name)
    if as_json:
        typer.echo(_record_json(client, parents[0], chosen, shown))
        return
    console.print(samples_table(f"{name} in {parents[0].info.run_name} ({parents[0].info.run_id[:8]}): "
                                f"{len(shown)} of {len(every)} instance(s)", shown, brief))
    experiment = chosen.info.experiment_id
    console.print("open a trace: " + trace_url(ui_url, experiment, "<trace id>"), soft_wrap=True, highlight=False)
    if html:
        html.write_text(samples_html(name, shown, ui_url, experiment))
        console.print(f"written to {html}")


def _record_json(client: Any, parent: Any, chosen: Any, shown: list[Any]) -> str:
    """The cell as the parent run's record holds it: its estimate, counts and the instances `shown` (in their
    order), or exit 2 where the run has no record."""
    from perseval.report.record import RecordError, download_record

    run = parent.info.run_id[:8]
    try:
        record = download_record(client, parent.info.run_id)
    except RecordError as exc:
        _error(f"{exc}: `samples` without --json lists the cell's instances from its traces")
        raise typer.Exit(2)
    key = chosen.data.tags.get("perseval.score_key", "")
    why = ("it was logged before perseval wrote run records" if record is None else
           "a control cell's instances are in its MLflow run, not in the record" if
           chosen.data.tags.get("perseval.control", "-") != "-" else
           f"its record has no cell {key or '(the child run has no score key)'}: the record was edited, or the "
           "child run was moved from another run")
    if record is None or key not in {c.key for c in record.cells}:
        _error(f"run {run} holds no record of this cell ({why}): `samples` without --json lists its instances")
        raise typer.Exit(2)
    cell = record.cell(key)
    mine = {(i.instance_id, i.repeat): i for i in record.cell_instances(key)}
    picked = [mine[(s.instance_id, s.repeat)].model_dump() for s in shown if (s.instance_id, s.repeat) in mine]
    return json.dumps({"run_id": record.run_id, "computed_by": record.computed_by,
                       **cell.model_dump(exclude={"row"}), "instances": picked}, indent=1)


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
    from perseval.llm.deployments import HOST
    from perseval.report.tracking import resolve_tracking, sqlite_path

    db = sqlite_path(tracking_uri)
    if db is not None and not db.is_file() and not create:
        _error(f"no MLflow store at {db} (from --tracking-uri {tracking_uri}): run `perseval run` in this folder "
               "first, point --tracking-uri at the experiment's store, or pass --create to start an empty one")
        raise typer.Exit(2)
    uri, artifacts = resolve_tracking(MLflowSettings(tracking_uri=tracking_uri))
    env = dict(os.environ, MLFLOW_SERVER_ENABLE_JOB_EXECUTION="false")
    console.print(f"MLflow store: {uri} (artifacts {artifacts}){' (new, empty)' if db and not db.is_file() else ''}",
                  soft_wrap=True)
    console.print(f"starting the MLflow UI on {HOST}:{port}; its address follows once it answers (Ctrl-C stops it)",
                  highlight=False)
    _announce_when_up(f"http://{HOST}:{port}")
    # exec, not a child process: Ctrl-C or a kill of this PID stops the server itself
    os.execve(sys.executable, ui_command(uri, artifacts, port), env)


# A watcher beside the server `ui` execs: prints the address once the UI answers, then exits; it also exits
# when its parent is not the MLflow server (the exec failed) or the server never answers.
ANNOUNCE = """
import os, sys, time, urllib.request
import psutil
url, parent, t0 = sys.argv[1], psutil.Process(os.getppid()), time.monotonic()
while time.monotonic() - t0 < 600 and parent.is_running():
    if time.monotonic() - t0 > 10 and "mlflow" not in " ".join(parent.cmdline()):
        break
    try:
        urllib.request.urlopen(url + "/health", timeout=2)
    except Exception:
        time.sleep(0.5)
        continue
    print(f"MLflow UI on {url} (Ctrl-C stops it)", flush=True)
    break
"""


def _announce_when_up(url: str) -> None:
    import subprocess

    subprocess.Popen([sys.executable, "-c", ANNOUNCE, url], stdin=subprocess.DEVNULL)


def ui_command(uri: str, artifacts: str, port: int) -> list[str]:
    """The launch command of the MLflow UI: loopback only."""
    from perseval.llm.deployments import HOST

    # one worker: the UI serves one researcher, and each of the default workers imports MLflow's whole server
    # before the first answer (63.6 s against 14.5 s on this 2-core machine under load; docs/guides/performance.md)
    return [sys.executable, "-m", "mlflow", "server", "--backend-store-uri", uri, "--default-artifact-root",
            artifacts, "--host", HOST, "--port", str(port), "--workers", "1"]


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
