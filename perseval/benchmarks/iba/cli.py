"""IBA-Bench's own commands: `perseval iba agreement` and `perseval iba label-sample` (the validation of
appendix B.1: two raters' agreement, and the sample they label, optionally labelled by a model).

The top of the house, like the `perseval` command that mounts it: it may use the pipeline's plan and store
(perseval.kernel.commands says what the command line lends it), and nothing in perseval imports it.
"""
from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from typing import Any, Optional

import typer

from perseval.kernel.commands import CommandHost


def commands(host: CommandHost) -> typer.Typer:
    app = typer.Typer(no_args_is_help=True, help="IBA-Bench's validation: rater agreement, the labelling sample.")

    @app.command()
    def agreement(labels_a: Path = typer.Argument(..., exists=True, dir_okay=False, metavar="LABELS_A",
                                                  help="first rater's CSV"),
                  labels_b: Path = typer.Argument(..., exists=True, dir_okay=False, metavar="LABELS_B",
                                                  help="second rater's CSV")) -> None:
        """Raw agreement and Gwet's AC1 of two annotation files (appendix B.1).

        Each CSV has `instance_id` and one 0/1 column per dimension (reasonableness, coherence,
        persona_consistency); empty cells are left out and counted.
        """
        import pandas as pd

        from perseval.benchmarks.iba.validation import agreement_report, read_label_csv
        from perseval.core.errors import PersevalError

        try:
            a, b = read_label_csv(labels_a), read_label_csv(labels_b)
        except PersevalError as exc:
            host.error(exc)
            raise typer.Exit(2)
        if not set(a.labels) & set(b.labels):
            host.error(f"{labels_a} and {labels_b} share no instance_id: nothing to compare")
            raise typer.Exit(2)
        report = agreement_report(a, b)
        rows = {**report["dimensions"], "overall": report["overall"]}
        host.console.print(pd.DataFrame(rows).T.to_markdown(floatfmt=".3f"))
        host.console.print(f"mean AC1 over dimensions: {report['mean_ac1']}")

    @app.command("label-sample")
    def label_sample(config: Path = typer.Argument(..., exists=True, dir_okay=False,
                                                   help="experiment YAML with an iba entry"),
                     n: int = typer.Option(200, min=1, help="instances to sample (the paper labels 200)"),
                     out_dir: Path = typer.Option(Path("labels"), help="where the files are written"),
                     model: Optional[str] = typer.Option(None, help="also label with this model of CONFIG"),
                     repeats: int = typer.Option(2, min=1, help="independent label runs of --model"),
                     output_root: Optional[str] = typer.Option(None, help="override the experiment's output_root"),
                     ) -> None:
        """A seeded sample of CONFIG's IBA instances (built first, as `perseval construct`), written as an
        empty label CSV with the instance views raters read and, with --model, that model's labels per
        repeat. Compare any two label files with `perseval iba agreement`."""
        host.offline()
        exp, plan = host.load(config)
        if not any(u.entry.name == "iba" for u in plan.data):
            host.error(f"{config}: no iba benchmark entry to sample")
            raise typer.Exit(2)
        if model is not None and model not in exp.models:
            host.error(f"--model {model!r} is not a model of {config} (known: {sorted(exp.models)})")
            raise typer.Exit(2)
        host.construct(config, exp, output_root)
        for path in write_label_sample(exp, plan, output_root or exp.experiment.output_root, n, out_dir, model,
                                       repeats):
            host.console.print(f"written {path}")

    return app


def write_label_sample(exp: Any, plan: Any, root: str, n: int, out_dir: Path, model: str | None,
                       repeats: int) -> list[Path]:
    """Files written: per IBA entry a label template and instance views, and with `model` its label files
    (the model served for the purpose, and stopped). `exp` and `plan` are what `host.load` returns (the
    resolved experiment and its plan; typed Any: a benchmark imports neither experiment/ nor pipeline/)."""
    from perseval.benchmarks.iba import label_sample as ls
    from perseval.llm.cache import RequestCache
    from perseval.llm.client import LLMClient
    from perseval.llm.deployments import ServerPool
    from perseval.core.instances import Document, Instance
    from perseval.core.store import StageStore

    out_dir.mkdir(parents=True, exist_ok=True)
    units = [u for u in plan.data if u.entry.name == "iba"]
    samples = {f"iba{i}" if len(units) > 1 else "iba":
               ls.pick(StageStore(root, "data", u.key).read_records(Instance),
                       StageStore(root, "documents", u.key).read_records(Document), n, u.seed)
               for i, u in enumerate(units)}
    paths = [p for name, s in samples.items() for p in ls.write_for_raters(s, out_dir, name)]
    if model is None:
        return paths
    cache = exp.experiment.request_cache or str(Path(root) / "request-cache.sqlite")
    with ServerPool(exp.models, exp.deployments, Path(root) / "logs") as pool:
        endpoint = pool.ensure({model})[model]
        client = LLMClient(endpoint, exp.models[model].sampling, RequestCache(cache), role="label",
                           run_id=uuid.uuid4().hex, seed=exp.experiment.seed)

        async def work() -> list[Path]:
            try:
                return [p for name, s in samples.items()
                        for p in await ls.write_judge_labels(client, s, out_dir, name, repeats)]
            finally:
                await client.aclose()

        return paths + asyncio.run(work())
