"""Bad input, loader by loader (issue 9): every case runs `perseval validate` (or `perseval iba agreement`) on a
broken copy of a valid input and expects exit code 2 and one line naming file, row and field, with no
traceback and no output folder; the cases accepted by design expect success. (The settings that validate
alone but fail later, and issue 35's careless inputs, are tests/test_bad_input_more.py.)"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import pandas as pd
import pytest
from typer.testing import CliRunner

from perseval_flows.cli import app
from perseval.core import files

from .conftest import REPO
from .bad_input_cases import _experiment, _valid_source

runner = CliRunner()
BIG = "x" * 10_000_000  # a 10 MB field


@dataclass(frozen=True)
class Case:
    loader: str  # iba, bespoke, apeb, custom (a benchmark source), experiment, agreement
    name: str
    breaks: Callable[[Path], None]  # breaks the valid input in this folder (or file, for experiment)
    expect: tuple[str, ...] | None  # what the one error line names; None: accepted by design


# --- how to break a JSON Lines table (IBA release, custom data) ---------------------------------------------

def _rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _write_rows(path: Path, rows: list) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def _edit_first(stem: str, change: Callable[[dict], None]) -> Callable[[Path], None]:
    def go(folder: Path) -> None:
        rows = _rows(folder / f"{stem}.jsonl")
        change(rows[0])
        _write_rows(folder / f"{stem}.jsonl", rows)
    return go


def _jsonl_cases(loader: str) -> list[Case]:
    first_user = "u1" if loader == "iba" else "mira"

    def duplicate(folder: Path) -> None:
        rows = _rows(folder / "instances.jsonl")
        _write_rows(folder / "instances.jsonl", rows + rows[:1])

    def latin1(folder: Path) -> None:
        path = folder / "histories.jsonl"
        lines = path.read_bytes().splitlines(keepends=True)
        lines[1] = lines[1].replace(b'"timestamp"', '"note": "café", "timestamp"'.encode("latin-1"), 1)
        path.write_bytes(b"".join(lines))

    def array(folder: Path) -> None:
        path = folder / "instances.jsonl"
        path.write_text('["not", "an", "object"]\n' + path.read_text())

    def control(folder: Path) -> None:  # a raw tab inside a JSON string
        path = folder / "instances.jsonl"
        path.write_bytes(path.read_bytes().replace(b'"query": "', b'"query": "\t', 1))

    def reversed_turns(folder: Path) -> None:
        _write_rows(folder / "histories.jsonl", _rows(folder / "histories.jsonl")[::-1])

    def bad_stamp(folder: Path) -> None:
        _edit_first("histories", lambda r: r.update(timestamp="last Tuesday"))(folder)

    n = len(_rows(REPO / "tests" / "data" / "custom_example" / "instances.jsonl")) + 1 if loader == "custom" else 2
    return [
        Case(loader, "missing_file", lambda f: (f / "histories.jsonl").unlink(), ("missing file histories.jsonl",)),
        Case(loader, "missing_column", _edit_first("instances", lambda r: r.pop("query")),
             ("instances.jsonl, row 1, field 'query': missing; expected a string",)),
        Case(loader, "wrong_type", _edit_first("instances", lambda r: r.update(user_id=["u1"])),
             ("instances.jsonl, row 1, field 'user_id': expected a string, got list",)),
        Case(loader, "empty_history", lambda f: (f / "histories.jsonl").write_text(""),
             (f"instances.jsonl, row 1, field 'user_id': user '{first_user}' has no turns in histories.jsonl",)),
        Case(loader, "duplicate_ids", duplicate, (f"instances.jsonl, row {n}, field 'instance_id': duplicate "
                                                  "instance_id",)),
        Case(loader, "non_utf8", latin1, ("histories.jsonl, row 2: not UTF-8 text",)),
        Case(loader, "10mb_field", _edit_first("instances", lambda r: r.update(query=BIG)), None),
        Case(loader, "json_array_line", array,
             ("instances.jsonl, row 1: expected a JSON object per line, got list",)),
        Case(loader, "control_character", control, ("instances.jsonl, row 1: not valid JSON: Invalid control "
                                                    "character at column",)),  # once "at at column"
        Case(loader, "timestamps_out_of_order", reversed_turns, None),  # ordered by instant when read
        Case(loader, "bad_timestamp", bad_stamp,
             ("histories.jsonl, row 1, field 'timestamp': 'last Tuesday' is not an ISO 8601 date-time",)),
    ]


# --- Bespoke release (Parquet) --------------------------------------------------------------------------

QUERIES = "queries/query_table.parquet"
SHOTS = "evaluation_shot/evaluation_shot.parquet"
GOLD = "gold_information/gold_information.parquet"


def _edit_table(rel: str, change: Callable[[pd.DataFrame], pd.DataFrame]) -> Callable[[Path], None]:
    def go(folder: Path) -> None:
        change(pd.read_parquet(folder / rel)).to_parquet(folder / rel, index=False)
    return go


def _set(column: str, value: object, row: int = 0) -> Callable[[pd.DataFrame], pd.DataFrame]:
    def go(df: pd.DataFrame) -> pd.DataFrame:
        df[column] = df[column].astype(object)
        df.at[row, column] = value
        return df
    return go


def _bespoke_cases() -> list[Case]:
    def no_history(folder: Path) -> None:
        for rel in ("chat_history/chat_history.parquet", "search_history/search_history.parquet"):
            _edit_table(rel, lambda df: df.iloc[0:0])(folder)

    def latin1(folder: Path) -> None:
        df = pd.read_parquet(folder / QUERIES)
        df["query"] = [q.encode("utf-8") for q in df["query"]]
        df.at[1, "query"] = "Où dîner ?".encode("latin-1")
        df.to_parquet(folder / QUERIES, index=False)  # a binary column: bytes, one row not UTF-8

    return [
        Case("bespoke", "missing_file", lambda f: (f / "chat_history" / "chat_history.parquet").unlink(),
             ("chat_history.parquet: file missing",)),
        Case("bespoke", "missing_column", _edit_table(QUERIES, lambda df: df.drop(columns=["query"])),
             ("query_table.parquet, field 'query': missing column",)),
        Case("bespoke", "wrong_type", _edit_table(GOLD, _set("gold_information_value", '{"gold_information": [7]}')),
             ("gold_information.parquet, row 0, field 'gold_information_value.gold_information[0]': a claim must "
              "be a non-empty string",)),
        Case("bespoke", "empty_history", no_history,
             ("query_table.parquet, row 0, field 'user': user", "has no session in chat_history")),
        Case("bespoke", "duplicate_ids", _edit_table(QUERIES, lambda df: pd.concat([df, df.iloc[:1]])),
             ("query_table.parquet, row", "field 'query-id': duplicate query")),
        Case("bespoke", "non_utf8", latin1, ("query_table.parquet, row 1, field 'query': not UTF-8 text",)),
        Case("bespoke", "10mb_field", _edit_table(QUERIES, _set("query", BIG)), None),
        Case("bespoke", "json_array_line", _edit_table(SHOTS, _set("evaluation_shot_value", "[1, 2]")),
             ("evaluation_shot.parquet, row 0, field 'evaluation_shot_value': expected a JSON object, got list",)),
    ]  # sessions carry no timestamps: no out-of-order case


# --- APeB behaviour logs (CSV) ----------------------------------------------------------------------------

def _csv(stem: str, change: Callable[[pd.DataFrame], pd.DataFrame]) -> Callable[[Path], None]:
    def go(folder: Path) -> None:
        path = folder / f"{stem}.csv"
        change(pd.read_csv(path, dtype=str, keep_default_na=False)).to_csv(path, index=False)
    return go


def _apeb_cases() -> list[Case]:
    def latin1(folder: Path) -> None:
        path = folder / "events.csv"
        lines = path.read_bytes().splitlines(keepends=True)
        lines[3] = lines[3].rstrip(b"\n") + "é\n".encode("latin-1")  # the last column is `category`
        path.write_bytes(b"".join(lines))

    def big_search(df: pd.DataFrame) -> pd.DataFrame:
        i = int(df.index[df["action"] == "search"][0])
        df.at[i, "text"] = BIG
        return df

    return [
        Case("apeb", "missing_file", lambda f: (f / "products.csv").unlink(), ("missing file products.parquet",)),
        Case("apeb", "missing_column", _csv("events", lambda df: df.drop(columns=["timestamp"])),
             ("events.csv, field 'timestamp': missing column(s) ['timestamp']",)),
        Case("apeb", "wrong_type", _csv("products", _set("price", "cheap", 1)),
             ("products.csv, row 2, field 'price': 'cheap' is not a non-negative number",)),
        Case("apeb", "empty_history", _csv("events", lambda df: df.iloc[0:0]), ("events.csv: no event rows",)),
        Case("apeb", "duplicate_ids", _csv("products", lambda df: pd.concat([df, df.iloc[:1]])),
             ("products.csv, row", "field 'product_id': duplicate product_id",)),
        Case("apeb", "non_utf8", latin1, ("events.csv, row 3: not UTF-8 text",)),
        Case("apeb", "10mb_field", _csv("events", big_search), None),
        Case("apeb", "timestamps_out_of_order", _csv("events", lambda df: df.iloc[::-1]), None),  # sorted on read
        Case("apeb", "bad_timestamp", _csv("events", _set("timestamp", "yesterday", 4)),
             ("events.csv, row 5, field 'timestamp': 'yesterday' is not an ISO 8601 date-time",)),
    ]  # CSV cells hold no JSON objects: no array case


# --- PrefEval and PersonaMem releases (issue 45: release files as hostile input) ---------------------------------

PE_EXPLICIT = "explicit_preference/travel_hotel.json"
PE_CHOICE = "implicit_preference/choice-based/travel_hotel.json"
PE_PERSONA = "implicit_preference/persona-driven/travel_hotel.json"
PE_INTER = "filtered_inter_turns.json"


def _json_rows(rel: str, change: Callable[[list], object]) -> Callable[[Path], None]:
    def go(folder: Path) -> None:
        rows = json.loads((folder / rel).read_text())
        change(rows)
        (folder / rel).write_text(json.dumps(rows, indent=1))
    return go


def _replace_bytes(rel: str, old: bytes, new: bytes) -> Callable[[Path], None]:
    def go(folder: Path) -> None:
        data = (folder / rel).read_bytes()
        assert old in data, (rel, old)
        (folder / rel).write_bytes(data.replace(old, new, 1))
    return go


def _as_folder(rel: str) -> Callable[[Path], None]:
    def go(folder: Path) -> None:
        (folder / rel).unlink()
        (folder / rel).mkdir()
    return go


def _link_loop(rel: str) -> Callable[[Path], None]:
    def go(folder: Path) -> None:
        (folder / rel).unlink()
        (folder / rel).symlink_to(folder / rel)  # the link points at itself
    return go


def _prefeval_cases() -> list[Case]:
    def duplicate_key(folder: Path) -> None:  # the same key twice in one object: JSON keeps only the last
        text = (folder / PE_PERSONA).read_text()
        (folder / PE_PERSONA).write_text(text.replace('"turn1": {', '"turn1": {"user": "u", "assistant": "a"}, '
                                                                    '"turn1": {', 1))

    def turn_one_twice(rows: list) -> None:  # "1" and "turn1" are one turn
        rows[0]["conversation"]["1"] = {"user": "Hi again.", "assistant": "Hello."}

    def aligned_elsewhere(rows: list) -> None:
        rows[0]["aligned_op"] = "A tent on the beach"

    def with_bom(folder: Path) -> None:
        (folder / PE_EXPLICIT).write_bytes(b"\xef\xbb\xbf" + (folder / PE_EXPLICIT).read_bytes())

    return [
        Case("prefeval", "non_utf8", _replace_bytes(PE_EXPLICIT, b"dog", "d\xf6g".encode("latin-1")),
             ("travel_hotel.json: not UTF-8 text: byte 0xf6 at line", "of the line (offset ", "save the file as UTF-8")),
        Case("prefeval", "control_character", _replace_bytes(PE_EXPLICIT, b"dog", b"d\x01og"),
             ("travel_hotel.json: not JSON: Invalid control character at line 3, column",)),
        Case("prefeval", "duplicate_ids", _json_rows(PE_PERSONA, turn_one_twice),
             ("persona-driven/travel_hotel.json, row 1, field 'conversation.1': turn 1 is written twice, as "
              "conversation.turn1 and conversation.1; keep one",)),
        Case("prefeval", "duplicate_json_key", duplicate_key,
             ("persona-driven/travel_hotel.json, row 1, field 'conversation.turn1': written twice in one object",)),
        Case("prefeval", "aligned_op_not_an_option", _json_rows(PE_CHOICE, aligned_elsewhere),
             ("choice-based/travel_hotel.json, row 1, field 'aligned_op': 'A tent on the beach' is not one of the "
              "row's options", "A pet-friendly cottage with a garden")),
        Case("prefeval", "file_is_folder", _as_folder(PE_INTER), ("filtered_inter_turns.json: is a folder, expected a "
                                                                  "file",)),
        Case("prefeval", "symlink_loop", _link_loop(PE_INTER), ("filtered_inter_turns.json: is a symlink loop",)),
        Case("prefeval", "byte_order_mark", with_bom, None),  # what some editors write: read as UTF-8
    ]


PM_QUESTIONS, PM_CONTEXTS = "questions_32k.csv", "shared_contexts_32k.jsonl"


def _persona_mem_cases() -> list[Case]:
    def long_question(folder: Path) -> None:  # a field over the csv module's 131,072-character default
        _replace_bytes(PM_QUESTIONS, b"Could you suggest", b"Could you suggest" + b" really" * 30_000)(folder)

    return [
        Case("persona_mem", "non_utf8", _replace_bytes(PM_QUESTIONS, b"library", "libr\xe4ry".encode("latin-1")),
             ("questions_32k.csv, row 1: not UTF-8 text: byte 0xe4 at line 2", "(offset ")),
        Case("persona_mem", "non_utf8_context", _replace_bytes(PM_CONTEXTS, b"the", "th\xe9".encode("latin-1")),
             ("shared_contexts_32k.jsonl, row 1: not UTF-8 text: byte 0xe9 at line 1", "(offset ")),
        Case("persona_mem", "field_over_128kb", long_question, None),
        Case("persona_mem", "file_is_folder", _as_folder(PM_CONTEXTS),
             ("shared_contexts_32k.jsonl: is a folder, expected a file",)),
        Case("persona_mem", "symlink_loop", _link_loop(PM_QUESTIONS), ("questions_32k.csv: is a symlink loop",)),
    ]


# --- LaMP release (issue 53: words that fit the case) -------------------------------------------------------------

LAMP_QUESTIONS = "LaMP_1/dev/dev_questions.json"


def _as_json_lines(rel: str) -> Callable[[Path], None]:
    """The file's JSON list written as JSON Lines, one row per line (what a converted dump often is)."""
    def go(folder: Path) -> None:
        _write_rows(folder / rel, json.loads((folder / rel).read_text()))
    return go


def _lamp_cases() -> list[Case]:
    def profile_object(rows: list) -> None:  # an object of items keyed by position: "missing" misled
        rows[0]["profile"] = {str(k): item for k, item in enumerate(rows[0]["profile"])}

    return [
        Case("lamp", "object_for_a_list", _json_rows(LAMP_QUESTIONS, profile_object),
             ("dev_questions.json, row 1, field 'profile': an object, expected a list",)),
        Case("lamp", "json_lines_for_json", _as_json_lines(LAMP_QUESTIONS),
             ("dev_questions.json: is JSON Lines (", "lines of one JSON value each), expected one JSON document")),
    ]


# --- the experiment file and `perseval iba agreement` files ------------------------------------------------------

def _yaml(change: Callable[[str], str | bytes]) -> Callable[[Path], None]:
    def go(path: Path) -> None:
        text = change(path.read_text())
        path.write_bytes(text if isinstance(text, bytes) else text.encode())
    return go


def _experiment_cases() -> list[Case]:
    return [
        Case("experiment", "missing_file", lambda p: p.unlink(), ("Invalid value for 'CONFIG'", "does not exist")),
        Case("experiment", "missing_column", _yaml(lambda t: t.replace("  agents:\n  - iba-no-history\n", "")),
             ("bad.yaml", "benchmarks.0.agents")),
        Case("experiment", "wrong_type", _yaml(lambda t: t.replace("sample: 2", "sample: many")),
             ("bad.yaml", "benchmarks.0.sample")),
        Case("experiment", "duplicate_ids", _yaml(lambda t: t + "name: again\n"), ("bad.yaml", "'name' is written twice")),
        Case("experiment", "non_utf8", _yaml(lambda t: (t + "# café\n").encode("latin-1")), ("bad.yaml", "not UTF-8")),
        Case("experiment", "10mb_field", _yaml(lambda t: t + "# " + BIG + "\n"), None),
        Case("experiment", "json_array_line", _yaml(lambda t: "- " + t.replace("\n", "\n  ")), ("bad.yaml",)),
    ]


HEADER = "instance_id,reasonableness,coherence,persona_consistency\n"
GOOD_LABELS = HEADER + "i1,1,1,0\ni2,0,1,1\n"


def _labels(text: str | bytes) -> Callable[[Path], None]:
    def go(path: Path) -> None:
        path.write_bytes(text if isinstance(text, bytes) else text.encode())
    return go


def _agreement_cases() -> list[Case]:
    return [
        Case("agreement", "missing_file", lambda p: p.unlink(), ("Invalid value for 'LABELS_B'", "does not exist")),
        Case("agreement", "missing_column", _labels("instance_id,reasonableness,coherence\ni1,1,1\n"),
             ("b.csv, row 1, field 'persona_consistency': missing column",)),
        Case("agreement", "wrong_type", _labels(HEADER + "i1,1,maybe,0\n"),
             ("b.csv, row 2, field 'coherence': label 'maybe' is not 0/1",)),
        Case("agreement", "empty_history", _labels(HEADER), ("share no instance_id",)),
        Case("agreement", "duplicate_ids", _labels(GOOD_LABELS + "i1,1,1,1\n"),
             ("b.csv, row 4, field 'instance_id': instance 'i1' is labelled twice",)),
        Case("agreement", "non_utf8", _labels((GOOD_LABELS + "café,1,1,1\n").encode("latin-1")),
             ("b.csv, row 4: not UTF-8 text",)),
        Case("agreement", "10mb_field", _labels(GOOD_LABELS + f"{BIG},1,1,1\n"),  # no 10 MB id is an id
             ("b.csv, row 4, field 'instance_id': not a readable CSV: field larger than field limit",
              "10000000 characters; at most 131072")),
    ]


CASES = [*_jsonl_cases("iba"), *_jsonl_cases("custom"), *_bespoke_cases(), *_apeb_cases(), *_prefeval_cases(),
         *_persona_mem_cases(), *_lamp_cases(), *_experiment_cases(), *_agreement_cases()]


# --- running a case ------------------------------------------------------------------------------------------

def _invoke(case: Case, tmp_path: Path, configs: Path) -> tuple[object, Path]:
    out = tmp_path / "out"
    if case.loader == "agreement":
        (tmp_path / "a.csv").write_text(GOOD_LABELS)
        (tmp_path / "b.csv").write_text(GOOD_LABELS)
        case.breaks(tmp_path / "b.csv")
        return runner.invoke(app, ["iba", "agreement", str(tmp_path / "a.csv"), str(tmp_path / "b.csv")]), out
    if case.loader == "experiment":
        exp = _experiment(configs, out)
        case.breaks(exp)
    else:
        source = _valid_source(case.loader, tmp_path / "source")
        case.breaks(source)
        exp = _experiment(configs, out, case.loader, source)
    return runner.invoke(app, ["validate", str(exp)]), out


@pytest.mark.parametrize("case", CASES, ids=[f"{c.loader}-{c.name}" for c in CASES])
def test_bad_input(case, tmp_path, configs, monkeypatch):
    monkeypatch.chdir(tmp_path)  # whatever a command wrote would land here
    result, out = _invoke(case, tmp_path, configs)
    text = result.output
    assert "Traceback" not in text and not out.exists() and not (tmp_path / "mlruns").exists(), text
    assert "at at " not in text and "Value error," not in text, text  # the wording of older messages
    if case.expect is None:
        assert result.exit_code == 0, text
        return
    lines = [line for line in text.splitlines() if line.strip()]
    assert result.exit_code == 2 and isinstance(result.exception, SystemExit), text
    if case.name == "missing_file" and case.loader in ("experiment", "agreement"):
        text = " ".join(text.replace("│", " ").split())  # typer's framed usage error, wrapped at 80 columns
    else:
        assert len(lines) == 1 and lines[0].startswith("error: "), text
    assert all(part in text for part in case.expect), text


@pytest.mark.parametrize("loader,rel", [("prefeval", PE_INTER), ("persona_mem", PM_QUESTIONS), ("iba", "histories.jsonl"),
                                        ("bespoke", "chat_history/chat_history.parquet"), ("apeb", "events.csv")])
def test_an_unreadable_release_file_is_named_unreadable(loader, rel, tmp_path, configs, monkeypatch):
    """A release file the user running perseval may not read: "unreadable", not "missing", "cannot read as
    Parquet" or a traceback. As root (this machine's tests) permission bits do not stop a read, so the open
    itself is refused there."""
    monkeypatch.chdir(tmp_path)
    source = _valid_source(loader, tmp_path / "source")
    target = source / rel
    if os.geteuid() != 0:
        target.chmod(0)
    else:
        real = open

        def refusing(path, *args, **kwargs):
            if Path(path) == target:
                raise PermissionError(13, "Permission denied", str(path))
            return real(path, *args, **kwargs)
        monkeypatch.setattr(files, "open", refusing, raising=False)  # the module's name lookup finds it first
    result = runner.invoke(app, ["validate", str(_experiment(configs, tmp_path / "out", loader, source))])
    assert result.exit_code == 2 and "Traceback" not in result.output, result.output
    assert result.output.strip() == f"error: {target}: unreadable (permission denied); give the user running " \
                                    "perseval read access", result.output
    assert not (tmp_path / "out").exists()


def test_valid_inputs_pass(tmp_path, configs, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for loader in ("iba", "custom", "bespoke", "apeb", "prefeval", "persona_mem", "lamp"):
        exp = _experiment(configs, tmp_path / "out", loader, _valid_source(loader, tmp_path / loader))
        result = runner.invoke(app, ["validate", str(exp)])
        assert result.exit_code == 0 and result.output.startswith("ok: "), (loader, result.output)


HEAVY = ("mlflow", "faiss", "torch", "sentence_transformers", "transformers", "FlagEmbedding", "sklearn",
         "matplotlib", "prefect", "dask", "distributed")


def test_a_bad_source_is_reported_without_heavy_imports(tmp_path, configs):
    """The real CLI in a fresh process: one line, exit 2, and none of the slow packages imported on the way."""
    source = _valid_source("iba", tmp_path / "source")
    _edit_first("instances", lambda r: r.pop("query"))(source)
    exp = _experiment(configs, tmp_path / "out", "iba", source)
    probe = ("import runpy, sys\nsys.argv = ['perseval', 'run', sys.argv[1]]\n"
             "try:\n    runpy.run_module('perseval_flows.cli', run_name='__main__')\nexcept SystemExit as exc:\n"
             "    code = exc.code\n"
             f"print('heavy:', sorted({{m.split('.')[0] for m in sys.modules}} & set({HEAVY!r})), 'exit:', code)\n")
    done = subprocess.run([sys.executable, "-c", probe, str(exp)], capture_output=True, text=True, timeout=120,
                          cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(REPO)})
    lines = done.stdout.splitlines()
    assert lines[0].startswith("error: ") and "instances.jsonl, row 1, field 'query': missing" in lines[0], done
    assert lines[-1] == "heavy: [] exit: 2" and "Traceback" not in done.stderr, done
    assert not (tmp_path / "out").exists()
