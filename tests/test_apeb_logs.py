"""APeB behaviour logs on disk (docs/apeb-log-schema.md): round trips, ingestion through the benchmark,
and precise errors naming file, row and field."""
from dataclasses import asdict

import pandas as pd
import pytest

from perseval.benchmarks.apeb.benchmark import APeB
from perseval.benchmarks.apeb.logfiles import load_logs, write_logs
from perseval.benchmarks.apeb.synth_logs import LogConfig, generate_logs
from perseval.core.errors import InputError

SEED = 5


@pytest.fixture(scope="module")
def logs():
    return generate_logs(8, SEED)


@pytest.mark.parametrize("fmt", ["parquet", "csv"])
def test_written_logs_read_back_identical(logs, tmp_path, fmt):
    write_logs(logs, tmp_path, fmt)
    back = load_logs(tmp_path)
    assert back.catalog.products == logs.catalog.products
    assert back.events == logs.events


def test_a_source_folder_builds_the_same_benchmark_as_the_generator(logs, tmp_path):
    write_logs(logs, tmp_path)
    generated = APeB().build(sample=8, seed=SEED, source=None)
    ingested = APeB().build(sample=8, seed=SEED, source=tmp_path)
    assert [asdict(i) for i in ingested.instances] == [asdict(i) for i in generated.instances]
    assert [asdict(d) for d in ingested.documents] == [asdict(d) for d in generated.documents]
    assert ingested.info["origin"] == "source" and ingested.info["sessions_kept"] == 8
    subset = APeB().build(sample=3, seed=SEED, source=tmp_path)  # a seeded subset of the mined sessions
    assert subset.info["sessions_used"] == 3 and len({i.user_id for i in subset.instances}) == 3
    assert {i.user_id for i in subset.instances} <= {i.user_id for i in generated.instances}


def _csv(tmp_path, events: pd.DataFrame, products: pd.DataFrame | None = None):
    events.to_csv(tmp_path / "events.csv", index=False)
    if products is None:
        products = pd.DataFrame([{"product_id": "p1", "category": "coffee", "title": "Dark beans", "price": "9.5",
                                  "brand": "Kaffio", "attributes": "dark-roast;organic"}])
    products.to_csv(tmp_path / "products.csv", index=False)


GOOD = {"user_id": "u1", "timestamp": "2025-03-01T10:00:00Z", "action": "search", "target": "", "product_id": "",
        "text": "coffee", "category": ""}


def _events(*changes: dict) -> pd.DataFrame:
    return pd.DataFrame([{**GOOD, **c} for c in changes])


def test_minimal_csv_with_defaults(tmp_path):
    events = _events({}, {"timestamp": "2025-03-01T10:05:00", "action": "view", "product_id": "p1", "text": ""},
                     {"timestamp": "2025-03-01 10:06:00+01:00", "action": "view", "target": "video", "text": "a review"})
    _csv(tmp_path, events.drop(columns=["category"]))
    logs = load_logs(tmp_path)
    (evs,) = logs.events.values()
    # 10:06 at +01:00 is 09:06 UTC: first in time order; a blank target with a product id is the product
    assert [(e.action, e.target) for e in evs] == [("view", "video"), ("search", ""), ("view", "product")]
    assert evs[2].category == "coffee" and evs[0].ts.utcoffset().total_seconds() == 0
    assert logs.catalog.by_id["p1"].attributes == ("dark-roast", "organic")


@pytest.mark.parametrize("change,row,field,message", [
    ({"action": "purchase"}, 2, "action", "'purchase' is not one of"),
    ({"timestamp": "03/01/2025"}, 2, "timestamp", "not an ISO 8601 date-time"),
    ({"action": "view", "product_id": "p404"}, 2, "product_id", "'p404' is not in the products table"),
    ({"action": "cart", "target": "video"}, 2, "target", "not a target of a 'cart' event"),
    ({"action": "view", "target": "product"}, 2, "product_id", "empty; a value is required"),
    ({"text": " "}, 2, "text", "empty; a value is required"),
    ({"user_id": ""}, 2, "user_id", "empty"),
])
def test_bad_event_rows_name_file_row_and_field(tmp_path, change, row, field, message):
    _csv(tmp_path, _events({}, change))
    with pytest.raises(InputError) as err:
        load_logs(tmp_path)
    e = err.value
    assert (e.path, e.row, e.field) == (str(tmp_path / "events.csv"), row, field) and message in e.detail


@pytest.mark.parametrize("change,field,message", [
    ({"price": "cheap"}, "price", "'cheap' is not a non-negative number"),
    ({"price": "-1"}, "price", "non-negative"),
    ({"title": ""}, "title", "empty"),
    ({"product_id": "p1"}, "product_id", "duplicate product_id 'p1' (first at row 1)"),
    ({"attributes": "[1, 2]"}, "attributes", "expected a list of strings"),
])
def test_bad_product_rows(tmp_path, change, field, message):
    first = {"product_id": "p1", "category": "coffee", "title": "Dark beans", "price": "9.5"}
    _csv(tmp_path, _events({}), pd.DataFrame([first, {**first, "product_id": "p2", **change}]))
    with pytest.raises(InputError) as err:
        load_logs(tmp_path)
    assert (err.value.row, err.value.field) == (2, field) and message in err.value.detail


def test_parquet_rows_are_checked_too(tmp_path, logs):
    write_logs(logs, tmp_path)
    events = pd.read_parquet(tmp_path / "events.parquet")
    events.loc[7, "action"] = "teleport"
    events.to_parquet(tmp_path / "events.parquet", index=False)
    with pytest.raises(InputError, match=r"events.parquet, row 8, field 'action': 'teleport'"):
        load_logs(tmp_path)


def test_folder_problems(tmp_path, logs):
    write_logs(logs, tmp_path)
    write_logs(logs, tmp_path, "csv")
    with pytest.raises(InputError, match="both events.parquet and events.csv exist"):
        load_logs(tmp_path)
    (tmp_path / "events.csv").unlink()
    (tmp_path / "products.parquet").unlink()
    (tmp_path / "products.csv").unlink()
    with pytest.raises(InputError, match="missing file products.parquet"):
        load_logs(tmp_path)
    pd.DataFrame([{"product_id": "p1", "title": "x"}]).to_csv(tmp_path / "products.csv", index=False)
    with pytest.raises(InputError, match=r"missing column\(s\) \['category', 'price'\]"):
        load_logs(tmp_path)


def test_generator_scales_its_catalogue():
    big = generate_logs(2, SEED, LogConfig(per_category=100))
    assert len(big.catalog.products) == 1200 and len({p.title for p in big.catalog.products}) > 1000
    with pytest.raises(Exception, match="per_category"):
        LogConfig(per_category=1000)
