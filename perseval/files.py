"""Locating a benchmark's input tables in the folder a user names."""
from __future__ import annotations

from pathlib import Path

from perseval.errors import InputError


def find_table(folder: Path, stem: str, suffixes: tuple[str, str], hint: str, holder: str = "a folder") -> Path:
    """`<stem><suffix>` in `folder` for exactly one of the two `suffixes`; `hint` says where the layout is."""
    first, second = (f"{stem}{s}" for s in suffixes)
    if not folder.is_dir():
        raise InputError(folder, f"not a folder; expected {holder} holding {first} or {second}. {hint}")
    found = [folder / name for name in (first, second) if (folder / name).is_file()]
    if not found:
        raise InputError(folder, f"missing file {first} (or {second}). {hint}")
    if len(found) > 1:
        raise InputError(folder, f"both {found[0].name} and {found[1].name} exist; keep one")
    return found[0]
