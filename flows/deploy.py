"""Scheduled Prefect deployments of the evaluate flow (researchers run benchmarks nightly)."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from prefect.schedules import Cron

from flows.scheduled import scheduled_evaluate


def deployment(config: Path, cron: str, name: str, timezone: str = "UTC") -> Any:
    """A runner deployment of the scheduled flow for one experiment file, with an active cron schedule."""
    return scheduled_evaluate.to_deployment(
        name=name, schedules=[Cron(cron, timezone=timezone)],
        parameters={"config_path": str(Path(config).resolve())},
        tags=["perseval"], description=f"perseval evaluate of {Path(config).name} on '{cron}' ({timezone})")


def register(config: Path, cron: str, name: str, timezone: str = "UTC") -> str:
    """Register (or update) the deployment on the Prefect API; returns its id."""
    return str(deployment(config, cron, name, timezone).apply())


def serve(config: Path, cron: str, name: str, timezone: str = "UTC") -> None:
    """Register the deployment and execute its scheduled runs in this process until stopped."""
    from prefect import serve as prefect_serve

    prefect_serve(deployment(config, cron, name, timezone))
