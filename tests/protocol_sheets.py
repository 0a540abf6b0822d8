"""Protocol sheets (docs/protocols/*.md): each paper setting beside what the paper and CPU configs really run.

A sheet names its two configs on a line `Paper config: `<path>` · CPU config: `<path>``, then holds one
Markdown table with the columns

  | path | paper | section | paper config | CPU config | status | why |

`path` addresses a value in `perseval show --json` (perseval.report.show, keys joined by '/'; `—` for a setting
perseval does not have). `paper` is the paper's value as JSON in backticks (`—` when the paper does not
state it; prose when it is not one value), `paper config` the paper config's effective value (JSON),
`CPU config` the CPU config's (JSON, optionally followed by `at `<path>`` when it lives elsewhere there;
`—` when the CPU config has no such setting). `status` is one of

  same        the paper config runs the paper's value
  deliberate  it runs another on purpose; `why` says why
  missing     perseval cannot run the paper's value yet; `why` says what is missing
  unstated    the paper does not state it; the row records perseval's choice

`check_sheet` lists every disagreement between a sheet and the effective settings: a value that moved
under an override chain, a departure not marked deliberate, a row without its reason.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from perseval.core.errors import ConfigError
from perseval.report.show import MISSING, at_path

COLUMNS = ["path", "paper", "section", "paper config", "CPU config", "status", "why"]
STATUSES = ("same", "deliberate", "missing", "unstated")
NONE = "—"
_CONFIGS = re.compile(r"Paper config:\s*`([^`]+)`.*CPU config:\s*`([^`]+)`")
_CODE = re.compile(r"^`([^`]*)`(?:\s+at\s+`([^`]+)`)?$")


@dataclass(frozen=True)
class Row:
    line: int
    path: str | None  # None: a setting perseval does not have
    paper: Any  # JSON value, prose (str), or MISSING when unstated
    section: str
    paper_config: Any
    cpu_config: Any  # MISSING: the CPU config has no such setting
    cpu_path: str | None
    status: str
    why: str


@dataclass(frozen=True)
class Sheet:
    path: Path
    paper_config: str
    cpu_config: str
    rows: list[Row]


def _value(cell: str, where: str, prose: bool = False) -> tuple[Any, str | None]:
    """A cell: `json` (optionally `at `path``), `—` (MISSING), or prose when allowed."""
    if cell == NONE:
        return MISSING, None
    m = _CODE.match(cell)
    if m:
        try:
            return json.loads(m.group(1)), m.group(2)
        except json.JSONDecodeError:
            if not prose:
                raise ConfigError(f"{where}: {cell!r} is not a JSON value in backticks") from None
    if prose:
        return cell.strip("`"), None
    raise ConfigError(f"{where}: expected a JSON value in backticks or {NONE}, got {cell!r}")


def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def read_sheet(path: str | Path) -> Sheet:
    path = Path(path)
    text = path.read_text(encoding="utf-8").splitlines()
    configs = next((m for m in map(_CONFIGS.search, text) if m), None)
    if configs is None:
        raise ConfigError(f"{path}: no line 'Paper config: `...` · CPU config: `...`'")
    header = next((i for i, line in enumerate(text) if _cells(line)[:1] == ["path"]), None)
    if header is None or _cells(text[header]) != COLUMNS:
        raise ConfigError(f"{path}: no table with the columns {' | '.join(COLUMNS)}")
    rows = []
    for n, line in enumerate(text[header + 2:], header + 3):
        if not line.startswith("|"):
            break
        cells = _cells(line)
        where = f"{path}, line {n}"
        if len(cells) != len(COLUMNS):
            raise ConfigError(f"{where}: {len(cells)} cells, {len(COLUMNS)} expected")
        p, paper, section, mine, cpu, status, why = cells
        if status not in STATUSES:
            raise ConfigError(f"{where}: status {status!r} is not one of {list(STATUSES)}")
        cpu_value, cpu_path = _value(cpu, where)
        rows.append(Row(n, None if p == NONE else p.strip("`"), _value(paper, where, prose=True)[0], section,
                        _value(mine, where)[0], cpu_value, cpu_path, status, why))
    return Sheet(path, configs.group(1), configs.group(2), rows)


def _show(value: Any) -> str:
    return NONE if value is MISSING else json.dumps(value)


def check_row(row: Row, paper: dict[str, Any], cpu: dict[str, Any]) -> list[str]:
    """What is wrong with one row against the paper and CPU configs' effective settings."""
    at = f"line {row.line} ({row.path or row.section})"
    problems = []
    if row.status in ("deliberate", "missing") and not row.why:
        problems.append(f"{at}: a {row.status} departure needs its reason in `why`")
    if row.status == "unstated" and row.paper is not MISSING:
        problems.append(f"{at}: status unstated, but the paper column gives {row.paper!r}")
    if row.status == "same" and row.paper != row.paper_config:
        problems.append(f"{at}: the paper says {_show(row.paper)} but the paper config runs "
                        f"{_show(row.paper_config)}, a departure not marked deliberate")
    if row.path is None:
        if row.status not in ("missing", "deliberate"):
            problems.append(f"{at}: a setting perseval lacks must be marked missing or deliberate")
        return problems
    effective = at_path(paper, row.path)
    if effective != row.paper_config:
        problems.append(f"{at}: the paper config's effective value is {_show(effective)}, the sheet says "
                        f"{_show(row.paper_config)}")
    cpu_value = at_path(cpu, row.cpu_path or row.path)
    if cpu_value != row.cpu_config:
        problems.append(f"{at}: the CPU config's effective value at {row.cpu_path or row.path} is {_show(cpu_value)},"
                        f" the sheet says {_show(row.cpu_config)}")
    return problems


def check_sheet(sheet: Sheet, paper: dict[str, Any], cpu: dict[str, Any]) -> list[str]:
    """Every problem of `sheet` against the effective settings of its paper and CPU configs."""
    return [f"{sheet.path}: {p}" for row in sheet.rows for p in check_row(row, paper, cpu)]
