import pytest

from perseval.core.parsing import extract_json, parse_binary
from perseval.core.instances import Judgment
from perseval.core.store import StageStore, atomic_write_parquet


def test_stage_store_round_trip_and_completion(tmp_path):
    store = StageStore(tmp_path, "judge", "abc")
    rows = [Judgment("i1", "a", 0, "j", 0, "c1", "checkpoint", None, "unscored", raw="maybe?")]
    assert not store.has_part(0) and not store.is_complete()
    store.write_records(0, rows, Judgment)
    assert store.has_part(0)
    back = store.read_records(Judgment)
    assert back == rows and back[0].score is None and back[0].raw == "maybe?"
    store.mark_complete({"n": 1})
    assert store.is_complete() and store.manifest() == {"n": 1}


def test_a_judgment_keeps_its_prompt_and_judgments_written_before_prompts_still_read(tmp_path):
    from perseval.core.schema import JUDGMENTS, to_table
    store = StageStore(tmp_path, "judge", "abc")
    prompt = {"messages": [{"role": "system", "content": "Judge one checkpoint."}, {"role": "user", "content": "x"}]}
    rows = [Judgment("i1", "a", 0, "j", 0, "c1", "checkpoint", 1.0, prompt=prompt)]
    store.write_records(0, rows, Judgment)
    assert store.read_records(Judgment)[0].prompt == prompt
    # a part from before the prompt column: read with no prompt, every other field as written
    old = to_table(rows, Judgment).drop_columns(["prompt"])
    assert "prompt" not in old.column_names and len(JUDGMENTS) == old.num_columns + 1
    store.write_part(0, old)
    back = store.read_records(Judgment)
    assert back[0].prompt is None and back[0].score == 1.0 and back[0].item_id == "c1"
    with pytest.raises(KeyError):  # a column with no default missing is still an error
        store.write_part(0, old.drop_columns(["item_id"]))
        store.read_records(Judgment)


def test_a_truncated_or_deleted_file_makes_an_output_incomplete(tmp_path):
    store = StageStore(tmp_path, "index", "k")
    (store.dir / "owners").mkdir(parents=True)
    (store.dir / "owners" / "u1").write_bytes(b"0123456789")
    store.write_records(0, [Judgment("i1", "a", 0, "j", 0, "c1", "checkpoint", 1.0)], Judgment)
    store.mark_complete({})
    assert store.is_complete()
    (store.dir / "owners" / "u1").write_bytes(b"01234")  # truncated
    assert not store.is_complete()
    store.mark_complete({})
    store.part_path(0).unlink()  # deleted
    assert not store.is_complete()
    (store.dir / "_manifest.json").write_text("{not json")  # a damaged manifest is not a finished output
    assert not store.is_complete()


def test_failed_write_leaves_no_part(tmp_path):
    path = tmp_path / "part-00000.parquet"

    with pytest.raises(Exception):
        atomic_write_parquet("not a table", path)  # type: ignore[arg-type]
    assert not path.exists() and not list(tmp_path.glob(".tmp-*"))


@pytest.mark.parametrize("text,expected", [
    ('{"verdict": true, "reason": "ok"}', 1.0), ('{"verdict": "no"}', 0.0), ("```json\n{\"verdict\": 1}\n```", 1.0),
    ("Yes, it does.", 1.0), ("No.", 0.0), ("I think the answer depends", None), ('{"verdict": "perhaps"}', None),
])
def test_parse_binary(text, expected):
    assert parse_binary(text)[0] == expected


def test_extract_json_from_prose():
    assert extract_json('Sure! Here it is: {"ranking": ["a", "b"]} hope it helps') == {"ranking": ["a", "b"]}
    assert extract_json("no json here") is None


def test_input_error_survives_pickling():
    import pickle

    from perseval.core.errors import InputError

    err = pickle.loads(pickle.dumps(InputError("a.parquet", "bad JSON", row=3, field="value")))
    assert str(err) == "a.parquet, row 3, field 'value': bad JSON" and err.row == 3
