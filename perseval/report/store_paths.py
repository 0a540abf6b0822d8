"""Where an experiment's MLflow store is: a tracking URI's SQLite file and its artifact folder, relative paths
made absolute. Path logic only, no MLflow import: `perseval ui` reads it before it starts the server."""
from __future__ import annotations

from pathlib import Path

from perseval.experiment.config import MLflowSettings


def sqlite_path(uri: str, base: Path | None = None) -> Path | None:
    """The database file of an SQLite tracking URI (a relative one from `base`, default the working
    folder); None for any other back end."""
    if not uri.startswith("sqlite:///"):
        return None
    path = Path(uri[len("sqlite:///"):])
    return path if path.is_absolute() else ((base or Path.cwd()) / path).resolve()


def resolve_tracking(settings: MLflowSettings, base: Path | None = None) -> tuple[str, str]:
    """(tracking_uri, artifact_location) with relative sqlite/artifact paths made absolute."""
    base = base or Path.cwd()
    uri = settings.tracking_uri
    if uri.startswith("sqlite:///") and not uri.startswith("sqlite:////"):
        db = (base / uri[len("sqlite:///"):]).resolve()
        db.parent.mkdir(parents=True, exist_ok=True)
        uri = f"sqlite:///{db}"
    artifacts = (base / settings.artifact_root).resolve()
    artifacts.mkdir(parents=True, exist_ok=True)
    return uri, artifacts.as_uri()
