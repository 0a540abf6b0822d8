"""Locating a benchmark's input tables in the folder a user names."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Iterator

from perseval.core.errors import InputError


def find_table(folder: Path, stem: str, suffixes: tuple[str, str], hint: str, holder: str = "a folder") -> Path:
    """`<stem><suffix>` in `folder` for exactly one of the two `suffixes`; `hint` says where the layout is."""
    first, second = (f"{stem}{s}" for s in suffixes)
    if not folder.is_dir():
        raise InputError(folder, f"not a folder; expected {holder} holding {first} or {second}. {hint}")
    found = [folder / name for name in (first, second) if (folder / name).is_file()]
    folders = [folder / name for name in (first, second) if (folder / name).is_dir()]
    if not found and folders:  # not "missing": the name is there, as a folder (an unpacked archive, say)
        raise InputError(folders[0], f"is a directory, expected a file ({first} or {second}). {hint}")
    if not found:
        raise InputError(folder, f"missing file {first} (or {second}). {hint}")
    if len(found) > 1:
        raise InputError(folder, f"both {found[0].name} and {found[1].name} exist; keep one")
    return found[0]


def utf8_lines(path: Path, header_lines: int = 0) -> Iterator[tuple[int, str]]:
    """(row, text) of each line of a UTF-8 file, rows counted from 1 after `header_lines` header lines.

    A line that is not UTF-8 is an InputError naming its row (a decoder error alone names only a byte
    offset in the whole file, which no one can find in an editor)."""
    with open(path, "rb") as fh:
        for n, raw in enumerate(fh, 1 - header_lines):
            try:
                yield n, raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise InputError(path, f"not UTF-8 text (byte {exc.start + 1} of the line); save the file as "
                                       "UTF-8", row=n) from None


def read_json(path: Path, hint: str) -> object:
    """The JSON value in `path`; InputError naming the file (missing, not UTF-8, not JSON: with the line)."""
    if not path.is_file():
        raise InputError(path, f"missing. {hint}")
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError as exc:
        raise InputError(path, f"not UTF-8 text (byte {exc.start + 1}); save the file as UTF-8") from None
    except json.JSONDecodeError as exc:
        raise InputError(path, f"not JSON: {exc.msg} at line {exc.lineno}") from None
