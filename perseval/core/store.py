"""Content-addressed stage outputs: `<root>/<stage>/<key>/part-*.parquet`.

A part is written to a temporary file in the same folder and renamed into
place, so a crash never leaves a half-written Parquet file that a later run
would mistake for a finished one. Files get the mode the umask gives any new
file (a temporary file is created private; it is opened up before the rename).
"""
from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from filelock import FileLock
import pyarrow as pa
import pyarrow.parquet as pq

from perseval.core.schema import from_table, to_table

MANIFEST = "_manifest.json"
PART_INFO = b"perseval.info"  # a part's own record (what computing it cost), in its Parquet metadata


class StageStore:
    """Where one stage's outputs live, addressed by the key of its inputs and config."""

    def __init__(self, root: str | Path, stage: str, key: str):
        self.root, self.stage, self.key = Path(root), stage, key
        self.dir = self.root / stage / key

    def part_path(self, part: int | str) -> Path:
        name = f"part-{part:05d}" if isinstance(part, int) else f"part-{part}"
        return self.dir / f"{name}.parquet"

    def has_part(self, part: int | str) -> bool:
        return self.part_path(part).exists()

    def write_part(self, part: int | str, table: pa.Table) -> Path:
        path = self.part_path(part)
        atomic_write_parquet(table, path)
        return path

    def write_records(self, part: int | str, records: list[Any], cls: type, info: dict[str, Any] | None = None) -> Path:
        """`info` is stored in the part's Parquet metadata: it is written (and renamed into place) with the rows."""
        table = to_table(records, cls)
        if info is not None:
            table = table.replace_schema_metadata({PART_INFO: json.dumps(info, sort_keys=True, default=str)})
        return self.write_part(part, table)

    def part_info(self, part: int | str) -> dict[str, Any]:
        """The `info` a part was written with ({} for none)."""
        raw = (pq.read_schema(self.part_path(part)).metadata or {}).get(PART_INFO)
        return json.loads(raw) if raw else {}

    def read_part(self, part: int | str, cls: type) -> list[Any]:
        return from_table(pq.read_table(self.part_path(part)), cls)

    def parts(self) -> list[Path]:
        return sorted(self.dir.glob("part-*.parquet"))

    def read(self, filters: list[tuple[str, str, Any]] | None = None, columns: list[str] | None = None) -> pa.Table:
        parts = self.parts()
        if not parts:
            raise FileNotFoundError(f"no Parquet parts under {self.dir}")
        return pa.concat_tables([pq.read_table(p, filters=filters, columns=columns) for p in parts])

    def read_records(self, cls: type) -> list[Any]:
        return from_table(self.read(), cls)

    # A manifest marks an output whose files are all written; it lists them with their sizes, so a deleted
    # or truncated file makes the output incomplete again (redone, never read), and carries the config for humans.
    def files(self) -> dict[str, int]:
        """Every file of this output (relative path -> size), leaving out the manifest and temporary files."""
        if not self.dir.exists():
            return {}
        return {str(p.relative_to(self.dir)): p.stat().st_size for p in sorted(self.dir.rglob("*"))
                if p.is_file() and p.name != MANIFEST and not p.name.startswith(".tmp-")}

    def is_complete(self) -> bool:
        try:
            listed = json.loads((self.dir / MANIFEST).read_text()).get("_files")
        except (OSError, ValueError):
            return False
        if not isinstance(listed, dict):
            return False
        return all((self.dir / name).is_file() and (self.dir / name).stat().st_size == size
                   for name, size in listed.items())

    def mark_complete(self, info: dict[str, Any]) -> None:
        atomic_write_text(json.dumps({**info, "_files": self.files()}, indent=2, sort_keys=True, default=str),
                          self.dir / MANIFEST)

    def clear(self) -> None:
        """Remove everything of this output (an unfinished one is rebuilt from scratch, never mixed)."""
        shutil.rmtree(self.dir, ignore_errors=True)

    def manifest(self) -> dict[str, Any]:
        """What the stage recorded (the file list kept for the completeness check is left out)."""
        return {k: v for k, v in json.loads((self.dir / MANIFEST).read_text()).items() if k != "_files"}


def unit_lock(root: str | Path, stage: str, key: str, part: int | str = "all") -> FileLock:
    """A lock on one unit's output, shared by every process that writes under `root` (two runs of
    overlapping experiments at once): the second waits, then finds the unit done instead of redoing it."""
    path = Path(root) / ".locks" / f"{stage}-{key}-{part}.lock"
    path.parent.mkdir(parents=True, exist_ok=True)
    return FileLock(str(path))


def _umask() -> int:
    """The process umask (read from /proc on Linux; elsewhere set and restored at once)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except OSError:
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _publish(tmp: str, path: Path) -> None:
    """Give the temporary file the mode a new file gets (mkstemp makes it 0600), then rename it into place."""
    os.chmod(tmp, 0o666 & ~_umask())
    os.replace(tmp, path)


def atomic_write_parquet(table: pa.Table, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".parquet")
    os.close(fd)
    try:
        pq.write_table(table, tmp)
        _publish(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def atomic_write_text(text: str, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        _publish(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
