"""A benchmark's own commands (`perseval <benchmark> <command>`), and what the command line lends them.

A benchmark that needs commands of its own (IBA's rater agreement and labelling sample) keeps them in its
folder, in a module its components.yaml names under `commands:`. That module's `commands(host)` returns a
Typer app; the `perseval` command mounts it under the benchmark's name. The host is the command line
itself: it loads and checks an experiment, builds its data with the orchestrated flow and reports errors
as every other command does, so a benchmark's command needs no import of the orchestration layer.
An installed plugin adds commands with `register_commands(name, factory)`.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Protocol


class CommandHost(Protocol):
    console: Any  # a rich Console

    def error(self, message: object) -> None:
        """Print an error line as every perseval command does."""

    def load(self, config: Path) -> tuple[Any, Any]:
        """The resolved experiment and its plan; on bad input, its errors and exit code 2."""

    def construct(self, config: Path, exp: Any, output_root: str | None) -> None:
        """Build (or find cached) the experiment's benchmark data, as `perseval construct` does."""

    def offline(self) -> None:
        """The embedded default's offline environment (no hub downloads)."""


CommandFactory = Callable[[CommandHost], Any]  # host -> typer.Typer
PLUGIN_COMMANDS: dict[str, CommandFactory] = {}


def register_commands(name: str, factory: CommandFactory) -> None:
    """Add `perseval <name> ...` from an installed plugin (its entry point module calls this)."""
    PLUGIN_COMMANDS[name] = factory
