"""perseval's own warnings on the terminal when `perseval run` has quieted Prefect's console handler."""
from __future__ import annotations

import logging
import os

# Set by `perseval run` when it quiets Prefect's console handler (which also carries the root logger): the
# CLI process and every Dask worker (which inherits the environment) then give perseval's own warnings their
# own stderr handler, so a damaged cache set aside or a fallback taken is still said on the terminal.
OWN_WARNINGS_ENV = "PERSEVAL_OWN_WARNINGS"


def show_perseval_warnings() -> None:
    logger = logging.getLogger("perseval")
    if any(getattr(h, "perseval_own", False) for h in logger.handlers):
        return
    handler = logging.StreamHandler()
    handler.perseval_own = True  # type: ignore[attr-defined]
    handler.setLevel(logging.WARNING)
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    logger.addHandler(handler)
    logger.propagate = False  # the root console handler is quieted; never print twice


def show_if_asked() -> None:
    """In a Dask worker (which inherits the CLI's environment): show perseval's warnings when the CLI did."""
    if os.environ.get(OWN_WARNINGS_ENV):
        show_perseval_warnings()
