"""Errors a user can act on: each names the file, row and field at fault."""
from __future__ import annotations

from pathlib import Path


class PersevalError(Exception):
    """Base class of errors perseval reports to the user."""


class InputError(PersevalError):
    """Malformed input data: names the file, the row and the field."""

    def __init__(self, path: str | Path, message: str, row: int | None = None, field: str | None = None):
        self.path, self.row, self.field, self.detail = str(path), row, field, message
        where = self.path
        if row is not None:
            where += f", row {row}"
        if field is not None:
            where += f", field '{field}'"
        super().__init__(f"{where}: {message}")

    def __reduce__(self):  # keep it picklable: Dask ships task errors between processes
        return (type(self), (self.path, self.detail, self.row, self.field))


class ConfigError(PersevalError):
    """A configuration file that does not validate: names the file and the key."""


class DeploymentError(PersevalError):
    """A model server that could not be started or reached; `log_path` is the server's own log, if any."""

    def __init__(self, message: str, log_path: str | Path | None = None):
        self.log_path = None if log_path is None else str(log_path)
        super().__init__(message)

    def __reduce__(self):  # picklable with its log path (Dask ships task errors between processes)
        return (type(self), (str(self), self.log_path))


class EndpointRefused(DeploymentError):
    """An endpoint refused a setting of its deployment YAML (the key, the structured-output dialect): the
    same command cannot succeed until that setting is fixed."""
