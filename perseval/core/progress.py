"""Progress bars per stage, on the terminal of whoever runs the flow."""
from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

console = Console(stderr=True)


@contextmanager
def stage_bar(stage: str, total: int, enabled: bool = True) -> Iterator[Progress | None]:
    """A bar for one stage; `advance` it once per finished unit."""
    if not enabled:
        yield None
        return
    with Progress(TextColumn(f"[bold]{stage:<10}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=console, transient=False) as bar:
        bar.add_task(stage, total=total)
        yield bar
