"""Scheduled Prefect deployments of the evaluate flow (researchers run benchmarks nightly).

`register` puts the flow on a process work pool: a Prefect worker started on the machine that holds the
models (`infra/prefect/worker.sh`) picks each scheduled run up and runs it in a subprocess from this
repository's checkout. `serve` is the no-worker alternative: this process itself executes the runs.
"""
from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from prefect import flow
from prefect.client.orchestration import get_client
from prefect.client.schemas.actions import WorkPoolCreate
from prefect.exceptions import ObjectAlreadyExists
from prefect.schedules import Cron

from perseval_flows.scheduled import scheduled_evaluate

REPO = Path(__file__).resolve().parents[1]
ENTRYPOINT = "flows/scheduled.py:scheduled_evaluate"
DEFAULT_POOL = "perseval"


def parameters(config: Path, sample: int | None) -> dict[str, Any]:
    return {"config_path": str(Path(config).resolve()), "sample": sample}


async def _ensure_pool(name: str) -> None:
    async with get_client() as client:
        try:
            await client.create_work_pool(WorkPoolCreate(name=name, type="process"))
        except ObjectAlreadyExists:
            pass


def register(config: Path, cron: str, name: str, timezone: str = "UTC", pool: str = DEFAULT_POOL,
             sample: int | None = None) -> str:
    """Register (or update) a deployment on the process work pool `pool` (created if missing); returns its id."""
    asyncio.run(_ensure_pool(pool))
    source = flow.from_source(source=str(REPO), entrypoint=ENTRYPOINT)
    return str(source.deploy(name=name, work_pool_name=pool, schedules=[Cron(cron, timezone=timezone)],
                             parameters=parameters(config, sample), tags=["perseval"], build=False, push=False,
                             print_next_steps=False,
                             description=f"perseval evaluate of {Path(config).name} on '{cron}' ({timezone})"))


def serve(config: Path, cron: str, name: str, timezone: str = "UTC", sample: int | None = None) -> None:
    """Register the deployment and execute its scheduled runs in this process until stopped (no worker)."""
    from prefect import serve as prefect_serve

    prefect_serve(scheduled_evaluate.to_deployment(
        name=name, schedules=[Cron(cron, timezone=timezone)], parameters=parameters(config, sample),
        tags=["perseval"], description=f"perseval evaluate of {Path(config).name} on '{cron}' ({timezone})"))
