"""Reading a benchmark's input files as hostile input: every loader opens, decodes and splits its files here,
so a bad byte, a folder or a link loop where a file should be, an unreadable file or an oversized CSV field
is one InputError naming the file, the row (or line) and the byte offset, never a traceback."""
from __future__ import annotations

import csv
import errno
import json
import os
import stat
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Any, BinaryIO, Callable, Iterator

from perseval.core.errors import InputError

# The csv module refuses a field over 131,072 characters by default; a release's CSV may hold longer texts
# (a PersonaMem question quoting a long passage). A reader that wants a bound passes its own (`max_field`).
CSV_FIELD_LIMIT = 2**31 - 1  # the largest a C long holds on every platform


def os_problem(path: str | Path, exc: OSError) -> str:
    """What an OSError met opening `path` means, in words a user can act on."""
    if exc.errno == errno.ELOOP:
        return "is a symlink loop (a link that leads back to itself); point it at the real file or folder"
    if exc.errno in (errno.EACCES, errno.EPERM):
        return "unreadable (permission denied); give the user running perseval read access"
    if exc.errno == errno.EISDIR:
        return "is a folder, expected a file"
    if exc.errno == errno.ENOTDIR:
        return "missing (a part of the path above it is a file, not a folder)"
    if exc.errno == errno.ENOENT and os.path.islink(path):
        return f"is a broken symbolic link (to {os.readlink(path)})"
    if exc.errno == errno.ENOENT:
        return "missing"
    return f"cannot be read: {exc.strerror}"


def path_problem(path: str | Path, want: str = "file") -> str | None:
    """Why `path` is not a readable `want` ("file", "folder" or "any"), or None when it is one."""
    try:
        mode = os.stat(path).st_mode
    except OSError as exc:
        return os_problem(path, exc)
    if want == "file" and stat.S_ISDIR(mode):
        return "is a folder, expected a file"
    if want == "file" and not stat.S_ISREG(mode):
        return "is not a regular file (a device, a pipe or a socket), expected a file"
    if want == "folder" and not stat.S_ISDIR(mode):
        return "is a file, expected a folder"
    return None


def unwritable(folder: Path) -> str | None:
    """Why perseval could not create files under `folder` (made if missing), or None when it could: the folder
    or its nearest existing parent must be a folder that takes a new entry, tried by making (and removing) an
    empty one, since permission bits say nothing for root and nothing about read-only or virtual file systems."""
    there = folder
    while not os.path.lexists(there) and there != there.parent:
        there = there.parent
    problem = path_problem(there, "folder")
    if problem is not None:
        return f"{there} {problem}" if there != folder else problem
    try:
        os.rmdir(tempfile.mkdtemp(prefix=".perseval-write-test-", dir=there))
    except OSError as exc:
        return f"{'it' if there == folder else there} cannot be written ({exc.strerror}): a read-only or virtual folder"
    return None


def require(path: Path, missing: str, want: str = "file") -> None:
    """An InputError naming `path` unless it is a `want`; `missing` says what belongs there when nothing is."""
    problem = path_problem(path, want)
    if problem is not None:
        raise InputError(path, f"{missing}" if problem == "missing" else problem)


@contextmanager
def open_bytes(path: Path, missing: str = "missing") -> Iterator[BinaryIO]:
    """`path` opened for reading bytes; what stops it (a folder, a loop, no permission) is an InputError."""
    require(path, missing)
    try:
        fh = open(path, "rb")
    except OSError as exc:
        raise InputError(path, os_problem(path, exc)) from None
    with fh:
        yield fh


def _not_utf8(path: Path, data: bytes, at: int, line: int, base: int = 0, row: int | None = None) -> InputError:
    """The error for byte `data[at]` on `line` of the file; `data` starts `base` bytes into the file."""
    column = at - (data.rfind(b"\n", 0, at) + 1) + 1
    return InputError(path, f"not UTF-8 text: byte 0x{data[at]:02x} at line {line}, byte {column} of the line (offset "
                            f"{base + at} in the file); save the file as UTF-8", row=row)


def read_text(path: Path, missing: str = "missing") -> str:
    """The whole file as UTF-8 text (a leading byte order mark dropped)."""
    with open_bytes(path, missing) as fh:
        data = fh.read()
    try:
        return data.decode("utf-8").removeprefix("\ufeff")
    except UnicodeDecodeError as exc:
        raise _not_utf8(path, data, exc.start, data.count(b"\n", 0, exc.start) + 1) from None


def utf8_lines(path: Path, header_lines: int = 0, missing: str = "missing") -> Iterator[tuple[int, str]]:
    """(row, text) of each line of a UTF-8 file, rows counted from 1 after `header_lines` header lines.

    A line that is not UTF-8 is an InputError naming its row, its line and the byte's offset in the file (a
    decoder error alone names only an offset, which no one can find in an editor)."""
    with open_bytes(path, missing) as fh:
        offset = 0
        for n, raw in enumerate(fh, 1 - header_lines):
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise _not_utf8(path, raw, exc.start, n + header_lines, offset, n) from None
            yield n, text.removeprefix("\ufeff") if offset == 0 else text
            offset += len(raw)


def csv_rows(path: Path, first_row: int = 1, max_field: int | None = None,
             missing: str = "missing") -> tuple[list[str], Iterator[tuple[int, dict[str, str]]]]:
    """The header of a UTF-8 CSV file and its records as (row, {column: value}).

    `first_row`: the number of the first record (1: data rows counted after the header; 2: the file's line
    numbers for one-line records). A record is read field by field with no size limit but `max_field`
    (characters), and over it is an InputError naming the row and the column, as is any csv error."""
    csv.field_size_limit(CSV_FIELD_LIMIT)
    lines = (text for _, text in utf8_lines(path, 2 - first_row, missing))
    reader = csv.DictReader(lines)
    try:
        header = list(reader.fieldnames or [])
    except csv.Error as exc:
        raise InputError(path, f"not a readable CSV: {exc}", row=first_row - 1) from None

    def records() -> Iterator[tuple[int, dict[str, str]]]:
        row = first_row - 1
        try:
            for row, rec in enumerate(reader, first_row):
                if max_field is not None:
                    for key, value in rec.items():
                        if isinstance(value, str) and len(value) > max_field:
                            raise InputError(path, f"not a readable CSV: field larger than field limit ({len(value)} "
                                                   f"characters; at most {max_field} here)", row=row, field=key)
                yield row, rec
        except csv.Error as exc:
            raise InputError(path, f"not a readable CSV: {exc}", row=row + 1) from None

    return header, records()


def json_problem(exc: json.JSONDecodeError, whole_file: bool = False) -> str:
    """A JSON decoder's complaint with where it is: json ends some messages with "at" ("Invalid control
    character at"), which a plain "at column N" after it would double."""
    where = f"line {exc.lineno}, column {exc.colno}" if whole_file else f"column {exc.colno}"
    return f"{exc.msg.removesuffix(' at')} at {where}"


def kind(value: object) -> str:
    """A JSON value's kind in words, as an error says what it found: 'an object', 'a list', 'a string', ..."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string" if value.strip() else "an empty string"
    return {list: "a list", dict: "an object"}.get(type(value), f"a {type(value).__name__}")


def wrong_kind(row: dict, key: str, expected: str) -> str:
    """What is wrong with `row[key]` where `expected` (e.g. 'a list of the user's profile items') belongs:
    "missing; expected ..." only when the key is absent, else what is there ("an object, expected ...")."""
    return f"missing; expected {expected}" if key not in row else f"{kind(row[key])}, expected {expected}"


def json_lines(text: str) -> int:
    """How many lines of `text` hold a JSON value each, when every non-blank line does and there are two or
    more (a JSON Lines file given where one JSON document belongs); 0 otherwise."""
    lines = [line for line in text.splitlines() if line.strip()]
    if len(lines) < 2:
        return 0
    for line in lines:
        try:
            json.loads(line)
        except json.JSONDecodeError:
            return 0
    return len(lines)


def read_json(path: Path, missing: str = "missing", pairs: Callable[[list], Any] | None = None) -> Any:
    """The one JSON document of `path` (`pairs`: json's object_pairs_hook); what is wrong is one InputError naming
    the file: missing (`missing` says what belongs there), not UTF-8, not JSON with its line, or JSON Lines where
    one document belongs."""
    text = read_text(path, missing)
    try:
        return json.loads(text, object_pairs_hook=pairs)
    except json.JSONDecodeError as exc:
        if n := json_lines(text):
            raise InputError(path, f"is JSON Lines ({n} lines of one JSON value each), expected one JSON document "
                                   "(a list of the rows); convert it, e.g. jq -s . file.jsonl > file.json") from None
        raise InputError(path, f"not JSON: {json_problem(exc, whole_file=True)}") from None


def find_table(folder: Path, stem: str, suffixes: tuple[str, str], hint: str, holder: str = "a folder") -> Path:
    """`<stem><suffix>` in `folder` for exactly one of the two `suffixes`; `hint` says where the layout is."""
    first, second = (f"{stem}{s}" for s in suffixes)
    problem = path_problem(folder, "folder")
    if problem is not None:
        raise InputError(folder, f"{'not a folder' if problem == 'missing' else problem}; expected {holder} holding "
                                 f"{first} or {second}. {hint}")
    there = [folder / name for name in (first, second) if os.path.lexists(folder / name)]
    found = [p for p in there if path_problem(p) is None]
    if not found and there:  # not "missing": the name is there, as a folder (an unpacked archive, say) or a loop
        raise InputError(there[0], f"{path_problem(there[0])} ({first} or {second}). {hint}")
    if not found:
        raise InputError(folder, f"missing file {first} (or {second}). {hint}")
    if len(found) > 1:
        raise InputError(folder, f"both {found[0].name} and {found[1].name} exist; keep one")
    return found[0]
