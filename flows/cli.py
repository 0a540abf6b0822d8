"""The `perseval` command: run, compare, ui, deploy."""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any, ContextManager, NoReturn, Optional

import typer
from rich.console import Console
from rich.table import Table

from flows.env import apply_offline_env

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="Evaluate how well LLM agents personalize (IBA-Bench, Bespoke, APeB).")
console = Console(width=None if sys.stdout.isatty() else 160)  # logs and CI: keep the table readable


def _error(message: object) -> None:
    """An error as the user sees it: unwrapped (a long path never splits the line), no markup from the text."""
    console.print("[red]error:[/red] ", end="")
    console.print(str(message), markup=False, highlight=False, soft_wrap=True)


INCOMPLETE_EXIT = 3  # the run finished, but some outputs or judgments failed: their cells are incomplete


def _print_headline(rows: list[dict]) -> None:
    table = Table(title="Headline scores (0-100)")
    cols = {"benchmark": "benchmark", "agent": "agent", "backbone": "backbone", "retriever": "retriever",
            "judge": "judge", "metric": "metric", "score": "score", "n": "n", "unscored_items": "unscored",
            "invalid_outputs": "invalid", "failed_outputs": "failed", "status": "status"}
    numeric = {"score", "n", "unscored_items", "invalid_outputs", "failed_outputs"}
    for key, label in cols.items():
        table.add_column(label, justify="right" if key in numeric else "left")
    for r in rows:
        table.add_row(*[_cell_text(c, r) for c in cols])
    console.print(table)
    if rows and "tokens_in" in rows[0]:
        console.print(_cost_table(rows))


def _cost_table(rows: list[dict]) -> Table:
    """What each cell cost: in total (cached answers at their original usage) and spent by this run."""
    def usd(value: Any) -> str | None:  # None or NaN (a frame's None) when no model of the cell has a price
        return None if value is None or value != value else f"{value:.4f}"

    priced = any(usd(r.get("cost_usd")) for r in rows)
    table = Table(title="Cost per cell (total; this run)")
    for label in ["cell", "tokens in", "tokens out", "LLM s", "wall s", *(["USD"] if priced else [])]:
        table.add_column(label, justify="left" if label == "cell" else "right")
    for r in rows:
        total, new = usd(r["cost_usd"]), usd(r["new_cost_usd"])
        cost = [] if not priced else ["-" if total is None else f"{total}; {new}"]
        table.add_row("/".join(r[k] for k in ("benchmark", "agent", "backbone", "retriever", "judge")),
                      f"{r['tokens_in']}; {r['new_tokens_in']}", f"{r['tokens_out']}; {r['new_tokens_out']}",
                      f"{r['llm_seconds']:.1f}", f"{r['wall_seconds']:.1f}", *cost)
    return table


def _cell_text(column: str, row: dict) -> str:
    value = row.get(column)
    if column == "score" and value is not None:
        return f"{value:.1f}"
    if column == "unscored_items" and row.get("unscored_share") is not None:
        return f"{value} ({row['unscored_share']:.0f}%)"  # items a judge left unscored, and their share
    return "" if value is None else str(value)


def _prefect_for(default_root: str, output_root: str | None) -> ContextManager[str]:
    """The Prefect API a flow command uses (a local server if none is configured), quiet logging."""
    os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")
    from flows.prefect_server import prefect_api  # after the env is set: Prefect reads it on import

    return prefect_api(Path(output_root or default_root) / "logs")


@app.command()
def run(config: Path = typer.Argument(..., exists=True, dir_okay=False, help="experiment YAML"),
        output_root: Optional[str] = typer.Option(None, help="override the experiment's output_root"),
        dask_address: Optional[str] = typer.Option(None, help="an existing Dask scheduler (tcp://host:8786)"),
        summary_json: Optional[Path] = typer.Option(None, help="also write the run summary as JSON here"),
        quiet: bool = typer.Option(False, help="no progress bars")) -> None:
    """Run an experiment end to end: construct, index, serve, run, judge, score, track."""
    apply_offline_env()
    exp, _ = _load_or_exit(config)  # fail on a bad file before any server starts (and before mlflow imports)
    summary = _run_flow(config, exp, output_root, dask_address=dask_address, show_progress=not quiet)
    from perseval.report import SMALL_MODEL_WARNING

    _print_headline(summary["headline"])
    if any(d.kind == "embedded" for d in exp.deployments.values()):
        console.print(f"[yellow]{SMALL_MODEL_WARNING}[/yellow]")
    console.print(f"stage seconds: {summary['timings']}")
    console.print(f"LLM requests sent this run: {summary['llm_requests']} {summary['requests']}")
    console.print(f"MLflow run id: [bold]{summary['mlflow_run_id']}[/bold] (experiment "
                  f"'{summary['experiment']}'); open the UI with: perseval ui")
    if summary_json:
        summary_json.write_text(json.dumps(summary, indent=2, default=str))
    incomplete = [r for r in summary["headline"] if r.get("status") == "incomplete"]
    if incomplete:
        failed_out = sum(r["failed_outputs"] for r in incomplete)
        failed_judg = sum(r["failed_judgments"] for r in incomplete)
        console.print(f"[red]incomplete:[/red] {len(incomplete)} cell(s) hold {failed_out} failed output(s) and "
                      f"{failed_judg} failed judgment(s), left out of their scores; run the same command again "
                      "to redo only those", soft_wrap=True)
        raise typer.Exit(INCOMPLETE_EXIT)


def _run_flow(config: Path, exp: Any, output_root: Optional[str], **kwargs: Any) -> dict:
    """The evaluate flow (whole, or stopped early by `kwargs`), with run's failure handling: a bad input found
    late is exit 2; a server, the disk, Prefect or Dask failing says what, what is kept and how to resume."""
    from perseval.errors import ConfigError, InputError

    _quiet_prefect_console()
    try:
        with _prefect_for(exp.experiment.output_root, output_root):
            from flows.runtime import run_experiment

            return run_experiment(str(config), output_root=output_root, **kwargs)
    except (InputError, ConfigError) as exc:
        _error(exc)
        raise typer.Exit(2)
    except Exception as exc:
        _late_failure(exc, Path(output_root or exp.experiment.output_root).resolve())


def _quiet_prefect_console() -> None:
    """Prefect prints a failed flow run's traceback on the console, in this process and in each Dask
    worker; `run` prints its own few lines instead (the traceback goes to a log file, and every log line
    stays in the Prefect API). Set before Prefect is imported, so the workers inherit it."""
    from flows.failure import TRACEBACK_ENV
    from tasks import OWN_WARNINGS_ENV, show_perseval_warnings

    if not os.environ.get(TRACEBACK_ENV):
        os.environ.setdefault("PREFECT_LOGGING_HANDLERS_CONSOLE_LEVEL", "CRITICAL")
        os.environ[OWN_WARNINGS_ENV] = "1"
        show_perseval_warnings()


def _late_failure(exc: Exception, root: Path) -> NoReturn:
    """A run that stopped after start-up: a few lines, no traceback (it is in a log), exit code 4."""
    from flows.failure import LATE_FAILURE_EXIT, failure_report

    head, *rest = failure_report(exc, root, sys.argv[1:])
    _error(head)
    for line in rest:
        console.print(line, markup=False, highlight=False, soft_wrap=True)
    raise typer.Exit(LATE_FAILURE_EXIT)


def _load_or_exit(config: Path) -> "Any":
    """The resolved experiment and its plan, or one line per problem and exit code 2 (no server started).

    The benchmark sources are read here too, so a bad release row is reported in seconds, not after the
    Prefect server and the Dask cluster started and the construct task failed."""
    from perseval.components import source_problems
    from perseval.config import load_experiment
    from perseval.errors import PersevalError
    from perseval.plan import make_plan

    try:
        exp = load_experiment(config)
        plan = make_plan(exp)
    except PersevalError as exc:
        _error(exc)
        raise typer.Exit(2)
    problems = source_problems(exp)
    for problem in problems:
        _error(problem)
    if problems:
        raise typer.Exit(2)
    return exp, plan


@app.command()
def validate(config: Path = typer.Argument(..., exists=True, dir_okay=False, help="experiment YAML")) -> None:
    """Check an experiment file and everything it names (no server is started)."""
    apply_offline_env()
    exp, plan = _load_or_exit(config)
    console.print(f"ok: {config} — {len(plan.data)} benchmark(s), {len(plan.runs())} run(s), "
                  f"{len(plan.cells)} cell(s), models {sorted(exp.models)}")


@app.command()
def construct(config: Path = typer.Argument(..., exists=True, dir_okay=False, help="experiment YAML"),
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
def stats(config: Path = typer.Argument(..., exists=True, dir_okay=False, help="experiment YAML"),
          output_root: Optional[str] = typer.Option(None, help="override the experiment's output_root"),
          out_dir: Optional[Path] = typer.Option(None, help="also write each table as CSV and Markdown here")) -> None:
    """Dataset statistics of every benchmark in CONFIG (built or loaded first, as `perseval construct`)."""
    apply_offline_env()
    exp, plan = _load_or_exit(config)
    _run_flow(config, exp, output_root, stop_after="construct", show_progress=False)
    from perseval.components import make_benchmark
    from perseval.stages import load_documents, load_instances, write_artifact

    root = output_root or exp.experiment.output_root
    for unit in plan.data:
        bench = make_benchmark(unit.entry.name, unit.entry.params)
        tables = bench.stats(load_instances(root, unit.key), load_documents(root, unit.key))
        for name, table in tables.items():
            console.print(f"\n[bold]{unit.entry.name}: {name}[/bold]")
            console.print(table.to_markdown(floatfmt=".2f"))
            if out_dir:
                (out_dir / unit.entry.name).mkdir(parents=True, exist_ok=True)
                write_artifact(out_dir / unit.entry.name, name, table)


@app.command()
def agreement(labels_a: Path = typer.Argument(..., exists=True, dir_okay=False, help="first rater's CSV"),
              labels_b: Path = typer.Argument(..., exists=True, dir_okay=False, help="second rater's CSV")) -> None:
    """IBA-Bench validation (appendix B.1): raw agreement and Gwet's AC1 of two annotation files.

    Each CSV has `instance_id` and one 0/1 column per dimension (reasonableness, coherence,
    persona_consistency); empty cells are left out and counted.
    """
    import pandas as pd

    from perseval.benchmarks.iba.validation import agreement_report, read_label_csv
    from perseval.errors import PersevalError

    try:
        a, b = read_label_csv(labels_a), read_label_csv(labels_b)
    except PersevalError as exc:
        _error(exc)
        raise typer.Exit(2)
    if not set(a.labels) & set(b.labels):
        _error(f"{labels_a} and {labels_b} share no instance_id: nothing to compare")
        raise typer.Exit(2)
    report = agreement_report(a, b)
    rows = {**report["dimensions"], "overall": report["overall"]}
    console.print(pd.DataFrame(rows).T.to_markdown(floatfmt=".3f"))
    console.print(f"mean AC1 over dimensions: {report['mean_ac1']}")


@app.command()
def compare(runs: Optional[list[str]] = typer.Argument(None, help="MLflow run ids (parent runs) and/or experiment "
                                                               "names; default: perseval-quickstart"),
            latest: int = typer.Option(2, help="how many recent parent runs of each named experiment"),
            out: Optional[Path] = typer.Option(None, help="also write the table here (.md or .csv)"),
            cost: bool = typer.Option(False, "--cost", help="also each run's tokens in/out and USD (when priced) "
                                                             "per cell"),
            between: Optional[tuple[str, str]] = typer.Option(
                None, metavar="CELL_A CELL_B", help="two cells (names or prefixes, e.g. iba/iba-rag iba/iba-agent): "
                "the instances whose scores differ most between them in each run, with their MLflow trace ids"),
            instances: int = typer.Option(0, help="how many differing instances to list (default 5 with --between; "
                                                  "without it, N > 0 lists them per cell whose key changed)"),
            tracking_uri: str = typer.Option("sqlite:///mlruns/mlflow.db")) -> None:
    """Headline score of every cell, side by side for the runs named, with deltas to the first (and with
    --cost what each cell cost in each run); with --between or --instances, the instances that differ most
    and their trace ids, to open side by side in `perseval ui`."""
    from mlflow.tracking import MlflowClient

    from perseval.config import MLflowSettings
    from perseval.tracking import compare_frame, parent_runs, resolve_tracking

    uri, _ = resolve_tracking(MLflowSettings(tracking_uri=tracking_uri))
    client = MlflowClient(uri)
    try:
        parents = parent_runs(client, runs or ["perseval-quickstart"], latest)
    except ValueError as exc:
        console.print(f"[red]error:[/red] {exc}")
        raise typer.Exit(2)
    if not parents:
        console.print(f"no finished runs for {runs or ['perseval-quickstart']}")
        raise typer.Exit(1)
    frame = compare_frame(client, parents, cost)
    # scores to 0.1, tokens whole, dollars to 0.0001 (a small cell costs cents)
    formats = [".1f"] + [".4f" if c.startswith("cost_usd") else ".0f" if c.startswith("tokens") else ".1f"
                         for c in frame.columns]
    console.print(frame.to_markdown(floatfmt=formats))
    if out:
        out.write_text(frame.to_csv() if out.suffix == ".csv" else frame.to_markdown(floatfmt=formats) + "\n")
        console.print(f"written to {out}")
    if between or instances:
        _print_differences(client, parents, between, instances or 5)


def _print_differences(client: Any, parents: list[Any], between: Optional[tuple[str, str]], n: int) -> None:
    """Per pair of cells: the instances whose scores differ most, with both trace ids."""
    from perseval.traces import cell_pairs, pair_differences

    try:
        pairs = cell_pairs(client, parents, between)
    except ValueError as exc:
        _error(exc)
        raise typer.Exit(2)
    if not pairs:
        console.print("no cell changed between the runs: no instance to set side by side")
    for a, b in pairs:
        rows = pair_differences(a, b, n)
        console.print(f"\n[bold]{a.data.tags.get('perseval.cell')} ({a.info.run_id[:8]}) vs "
                      f"{b.data.tags.get('perseval.cell')} ({b.info.run_id[:8]})[/bold]: {len(rows)} instance(s) "
                      "that differ most", soft_wrap=True)
        table = Table()
        for label in ("instance", "repeat", "score A", "score B", "trace A", "trace B"):
            table.add_column(label, no_wrap=label.startswith("trace"))
        for r in rows:
            table.add_row(r["instance_id"], str(r["repeat"]), _score_text(r["score_a"], r["status_a"]),
                          _score_text(r["score_b"], r["status_b"]), r["trace_a"], r["trace_b"])
        console.print(table)
    if pairs:
        console.print("open a trace in `perseval ui`: Traces tab of the experiment, or "
                      "http://127.0.0.1:5000/#/experiments/<id>/traces?traceId=<trace id>", soft_wrap=True)


def _score_text(score: Optional[float], status: str) -> str:
    return f"{score:.1f}" if score is not None else status


@app.command()
def ui(port: int = typer.Option(5000), tracking_uri: str = typer.Option("sqlite:///mlruns/mlflow.db"),
       create: bool = typer.Option(False, "--create", help="start on an empty store where TRACKING_URI has none")) -> None:
    """Start the MLflow UI on 127.0.0.1."""
    from perseval.config import MLflowSettings
    from perseval.llm.deployments import HOST
    from perseval.tracking import resolve_tracking, sqlite_path

    db = sqlite_path(tracking_uri)
    if db is not None and not db.is_file() and not create:
        _error(f"no MLflow store at {db} (from --tracking-uri {tracking_uri}): run `perseval run` in this folder "
               "first, point --tracking-uri at the experiment's store, or pass --create to start an empty one")
        raise typer.Exit(2)
    uri, artifacts = resolve_tracking(MLflowSettings(tracking_uri=tracking_uri))
    env = dict(os.environ, MLFLOW_SERVER_ENABLE_JOB_EXECUTION="false")
    console.print(f"MLflow store: {uri} (artifacts {artifacts}){' (new, empty)' if db and not db.is_file() else ''}",
                  soft_wrap=True)
    console.print(f"MLflow UI on http://{HOST}:{port} (Ctrl-C stops it)")
    # exec, not a child process: Ctrl-C or a kill of this PID stops the server itself
    os.execve(sys.executable, ui_command(uri, artifacts, port), env)


def ui_command(uri: str, artifacts: str, port: int) -> list[str]:
    """The launch command of the MLflow UI: loopback only."""
    from perseval.llm.deployments import HOST

    return [sys.executable, "-m", "mlflow", "server", "--backend-store-uri", uri, "--default-artifact-root",
            artifacts, "--host", HOST, "--port", str(port)]


@app.command()
def deploy(config: Path = typer.Argument(..., exists=True, dir_okay=False, help="experiment YAML"),
           cron: str = typer.Option(..., help="cron expression, e.g. '0 2 * * *' for nightly at 02:00"),
           name: Optional[str] = typer.Option(None, help="deployment name (default: the experiment name)"),
           timezone: str = typer.Option("UTC"),
           pool: str = typer.Option("perseval", help="the process work pool a worker polls (created if missing)"),
           sample: Optional[int] = typer.Option(None, help="run every benchmark on this many instances"),
           serve: bool = typer.Option(False, "--serve", help="no worker: execute the scheduled runs here (blocks)")) -> None:
    """Register the evaluate flow for CONFIG as a scheduled Prefect deployment (needs PREFECT_API_URL).

    A worker on the work pool runs it (`infra/prefect/worker.sh`); with --serve this process does."""
    apply_offline_env()
    exp, _ = _load_or_exit(config)
    from flows import deploy as deploy_mod  # Prefect: only once the experiment and its sources are good

    dep_name = name or exp.experiment.name
    if serve:
        console.print(f"serving deployment {dep_name!r} on '{cron}' ({timezone}); Ctrl-C stops it")
        deploy_mod.serve(config, cron, dep_name, timezone, sample)
        return
    dep_id = deploy_mod.register(config, cron, dep_name, timezone, pool, sample)
    console.print(f"deployment {dep_name!r} registered (id {dep_id}) on work pool {pool!r} with schedule "
                  f"'{cron}' ({timezone}). Start a worker for it with `infra/prefect/worker.sh {pool}`; "
                  f"`prefect deployment run 'perseval-scheduled-evaluate/{dep_name}'` runs it now.")


if __name__ == "__main__":
    app()
