"""An instance's payload and gold are read only through the benchmark's typed views (perseval.benchmarks.views):
no module outside a views.py reads them by key, so a misspelt key fails where the data is made (the construct
stage's view check), not as a silent None stages later. The files below are the ones still to convert; the
test fails on a read anywhere else, on a new read in one of them, and when one is converted (shrink the list)."""
from __future__ import annotations

import ast
from collections import Counter
from pathlib import Path

from .conftest import REPO

PARTS = ("payload", "gold")
KEYED_CALLS = ("get", "pop", "setdefault")
SCANNED = ("perseval", "tasks", "flows")

# converted by the lead after the merge: file -> its reads today
ALLOWED = {
    "perseval/benchmarks/apeb/judges/rubric.py": 1,
    "perseval/benchmarks/bespoke/judges/feedback_match.py": 1,
    "perseval/benchmarks/bespoke/judges/recall.py": 1,
    "perseval/benchmarks/iba/judges/checkpoint.py": 2,
    "perseval/benchmarks/iba/judges/slot_llm.py": 5,
    "perseval/benchmarks/iba/judges/validation.py": 6,
}


def _is_part(node: ast.AST) -> bool:
    """`<anything>.payload` or `<anything>.gold`."""
    return isinstance(node, ast.Attribute) and node.attr in PARTS


def keyed_reads(source: str) -> list[int]:
    """Line of each keyed use of an instance's payload or gold: `x.gold[k]`, `x.payload.get(k)` (or pop,
    setdefault), `k in x.gold`, and `name = x.payload` (an alias read by key further on)."""
    lines = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Subscript):
            hit = _is_part(node.value)
        elif isinstance(node, ast.Call):
            hit = isinstance(node.func, ast.Attribute) and node.func.attr in KEYED_CALLS and _is_part(node.func.value)
        elif isinstance(node, ast.Compare):
            hit = any(isinstance(op, (ast.In, ast.NotIn)) and _is_part(right)
                      for op, right in zip(node.ops, node.comparators))
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            hit = len(targets) == 1 and isinstance(targets[0], ast.Name) and node.value is not None \
                and _is_part(node.value)
        else:
            hit = False
        if hit:
            lines.append(node.lineno)
    return sorted(lines)


def reads_outside_views(root: Path) -> Counter[str]:
    """Keyed reads per file (path relative to `root`) of every module under SCANNED except views.py files."""
    found: Counter[str] = Counter()
    for top in SCANNED:
        for path in sorted((root / top).rglob("*.py")):
            if path.name != "views.py":
                for _ in keyed_reads(path.read_text(encoding="utf-8")):
                    found[path.relative_to(root).as_posix()] += 1
    return found


def test_payload_and_gold_are_read_only_through_views():
    found = reads_outside_views(REPO)
    new = {f: n for f, n in found.items() if n > ALLOWED.get(f, 0)}
    assert new == {}, "read these through the benchmark's views (perseval/benchmarks/<name>/views.py)"
    assert dict(found) == ALLOWED, "a file was converted: take it off ALLOWED"


def test_every_kind_of_keyed_read_is_found_and_view_reads_are_not():
    src = """
def f(inst, view, rows):
    a = inst.payload["scenario"]          # 1
    b = inst.gold.get("slots", {})        # 2
    if "dynamic" in inst.payload:         # 3
        pass
    g = inst.gold                         # 4
    inst.gold["oracle"] = []              # 5: a write after construction
    inst.payload.pop("api")               # 6
    ok = [IbaPayload.of(inst).scenario, view.gold_items, rows["payload"], {**inst.gold}, dict(inst.payload)]
    for k, v in inst.payload.items():     # iterating every field is not a keyed read
        pass
    payload = {"scenario": "s"}
    payload["n"] = 1                      # building a new payload is not a read of an instance
"""
    assert keyed_reads(src) == [3, 4, 5, 7, 8, 9]


def test_views_py_files_are_skipped_and_other_folders_scanned(tmp_path):
    (tmp_path / "perseval" / "b").mkdir(parents=True)
    (tmp_path / "flows").mkdir()
    (tmp_path / "tasks").mkdir()
    (tmp_path / "perseval" / "b" / "views.py").write_text("x = inst.gold['a']\n")
    (tmp_path / "perseval" / "b" / "stats.py").write_text("x = inst.gold['a']\ny = i.payload.get('b')\n")
    (tmp_path / "flows" / "cli.py").write_text("z = 'k' in inst.gold\n")
    assert reads_outside_views(tmp_path) == {"perseval/b/stats.py": 2, "flows/cli.py": 1}
