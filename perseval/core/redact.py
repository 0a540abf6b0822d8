"""Keys never reach a stored text: configured key values and `Bearer ...` tokens are masked.

An endpoint may echo the key it was sent (`Invalid API key: Bearer sk-...` in a
401 body), and that text would travel into an agent output's error, a judgment,
the Parquet parts and the MLflow artifacts. Every key perseval reads from the
environment is registered here when it is read, and every error and raw text is
passed through `redact` before it is stored.
"""
from __future__ import annotations

import dataclasses
import os
import re
from typing import Any, Sequence, TypeVar

MASK = "[REDACTED]"
MIN_SECRET_CHARS = 6  # shorter values would mask ordinary words
# a bearer token: long, with a digit somewhere, so prose ("Bearer bonds") is left alone
_BEARER = re.compile(r"\b(Bearer\s+)(?=[A-Za-z0-9._~+/=\-]*\d)[A-Za-z0-9._~+/=\-]{12,}")
_SECRETS: set[str] = set()
R = TypeVar("R")


def register_secret(value: str | None) -> None:
    if value and len(value) >= MIN_SECRET_CHARS:
        _SECRETS.add(value)


def secret_from_env(variable: str | None) -> str:
    """The value of `variable` (a configured key), registered for redaction; '' when unset."""
    value = os.environ.get(variable, "") if variable else ""
    register_secret(value)
    return value


def redact(text: str) -> str:
    if not text:
        return text
    for secret in sorted(_SECRETS, key=len, reverse=True):
        text = text.replace(secret, MASK)
    return _BEARER.sub(rf"\g<1>{MASK}", text)


def redact_value(value: Any) -> Any:
    """Strings inside lists and dicts (an agent's trace, a parsed answer) redacted, the rest as is."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, list):
        return [redact_value(v) for v in value]
    if isinstance(value, dict):
        return {k: redact_value(v) for k, v in value.items()}
    return value


def redact_records(records: Sequence[R]) -> list[R]:
    """Copies of dataclass records with every text field redacted: the last step before a stage writes them."""
    out = []
    for rec in records:
        changes = {f.name: redact_value(getattr(rec, f.name)) for f in dataclasses.fields(rec)  # type: ignore[arg-type]
                   if isinstance(getattr(rec, f.name), (str, list, dict))}
        out.append(dataclasses.replace(rec, **changes))  # type: ignore[type-var]
    return out
