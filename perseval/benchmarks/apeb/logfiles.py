"""Behaviour logs on disk (docs/apeb-log-schema.md): read and validate, or write, an events table and a
products table, each as Parquet or CSV, in one folder (the benchmark entry's `source:`).

Every row is checked; the first problem raises InputError naming the file, the 1-based data row (a
Parquet row index + 1; in a CSV the header does not count) and the field, and saying what was expected.
Checks run column-wise (a real log has millions of rows), then the first failing row is reported.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable, Literal

import pandas as pd

from perseval.core import files
from perseval.benchmarks.apeb.catalog import Catalog, Product
from perseval.benchmarks.apeb.logs import ACTION_TARGETS, ACTIONS, BehaviourLogs, Event
from perseval.core.errors import InputError

EVENTS, PRODUCTS = "events", "products"
SUFFIXES = (".parquet", ".csv")
EVENT_COLUMNS = ("user_id", "timestamp", "action", "target", "product_id", "text", "category")
PRODUCT_COLUMNS = ("product_id", "category", "title", "price", "brand", "attributes")
REQUIRED = {EVENTS: ("user_id", "timestamp", "action"), PRODUCTS: ("product_id", "category", "title", "price")}
SCHEMA_DOC = "see docs/apeb-log-schema.md"


def find_table(folder: Path, stem: str) -> Path:
    """`<stem>.parquet` or `<stem>.csv` in `folder`: exactly one of them."""
    return files.find_table(folder, stem, SUFFIXES, SCHEMA_DOC)


def read_table(path: Path, stem: str) -> pd.DataFrame:
    """The table with its known columns (missing optional ones empty); a required one missing is an error."""
    try:
        with files.open_bytes(path) as fh:  # a file perseval may not read is named so, not "cannot read as CSV"
            if path.suffix == ".csv":
                df = pd.read_csv(fh, dtype=str, keep_default_na=False, na_values=[], encoding="utf-8")
            else:
                df = pd.read_parquet(fh)
    except InputError:
        raise
    except UnicodeDecodeError:
        for _ in files.utf8_lines(path, header_lines=1):  # raises naming the first row that is not UTF-8
            pass
        raise
    except Exception as exc:  # pandas/pyarrow raise many types for a damaged file
        raise InputError(path, f"cannot read as {path.suffix[1:].upper()}: {exc}") from None
    known = EVENT_COLUMNS if stem == EVENTS else PRODUCT_COLUMNS
    missing = [c for c in REQUIRED[stem] if c not in df.columns]
    if missing:
        raise InputError(path, f"missing column(s) {missing}; columns found: {list(df.columns)}", field=missing[0])
    for col in known:
        if col not in df.columns:
            df[col] = ""
    return df[list(known)].reset_index(drop=True)


# --- column checks ---------------------------------------------------------------------------------


def _fail_first(path: Path, bad: pd.Series, field: str, message: Callable[[Any], str], values: pd.Series) -> None:
    if bool(bad.any()):
        i = int(bad.to_numpy().nonzero()[0][0])
        raise InputError(path, message(values.iloc[i]), row=i + 1, field=field)


def _text(df: pd.DataFrame, col: str) -> pd.Series:
    """A column as stripped strings, nulls as ''."""
    return df[col].map(lambda v: "" if v is None or (isinstance(v, float) and pd.isna(v)) else str(v).strip())


def _require(path: Path, values: pd.Series, field: str, mask: pd.Series | None = None) -> None:
    bad = values.eq("") if mask is None else values.eq("") & mask
    _fail_first(path, bad, field, lambda v: "empty; a value is required here", values)


def _timestamps(path: Path, df: pd.DataFrame) -> pd.Series:
    raw = df["timestamp"]
    if pd.api.types.is_datetime64_any_dtype(raw):
        ts = raw.dt.tz_localize("UTC") if raw.dt.tz is None else raw.dt.tz_convert("UTC")
    else:
        ts = pd.to_datetime(_text(df, "timestamp"), utc=True, errors="coerce", format="ISO8601")
    _fail_first(path, ts.isna(), "timestamp",
                lambda v: f"{v!r} is not an ISO 8601 date-time (e.g. 2025-03-01T09:30:00Z)", raw.astype(str))
    return ts


def _attributes(path: Path, value: Any, row: int) -> tuple[str, ...]:
    """A list of strings, JSON list text, or ';'-separated text."""
    if value is None or (isinstance(value, float) and pd.isna(value)):
        return ()
    if not isinstance(value, str):
        items = list(value)  # a Parquet list column arrives as a list or numpy array
    elif value.strip().startswith("["):
        try:
            items = json.loads(value)
        except json.JSONDecodeError as exc:
            raise InputError(path, f"not a JSON list: {files.json_problem(exc)}", row=row, field="attributes") from None
    else:
        items = value.split(";")
    if not isinstance(items, list) or not all(isinstance(x, str) for x in items):
        raise InputError(path, f"expected a list of strings, got {value!r}", row=row, field="attributes")
    return tuple(x.strip() for x in items if x.strip())


# --- the two tables --------------------------------------------------------------------------------


def load_products(path: Path) -> Catalog:
    df = read_table(path, PRODUCTS)
    cols = {c: _text(df, c) for c in ("product_id", "category", "title", "brand")}
    for c in ("product_id", "category", "title"):
        _require(path, cols[c], c)
    dup = cols["product_id"].duplicated()
    first = {pid: i + 1 for i, pid in reversed(list(enumerate(cols["product_id"])))}
    _fail_first(path, dup, "product_id", lambda v: f"duplicate product_id {v!r} (first at row {first[v]})",
                cols["product_id"])
    price = pd.to_numeric(df["price"].map(lambda v: str(v).strip() if isinstance(v, str) else v), errors="coerce")
    _fail_first(path, price.isna() | (price < 0), "price", lambda v: f"{v!r} is not a non-negative number",
                df["price"])
    products = [Product(pid, title, cat, float(p), brand, _attributes(path, attrs, i + 1))
                for i, (pid, title, cat, p, brand, attrs) in enumerate(zip(
                    cols["product_id"], cols["title"], cols["category"], price, cols["brand"], df["attributes"]))]
    if not products:
        raise InputError(path, "no product rows")
    return Catalog(products)


def load_events(path: Path, catalog: Catalog) -> dict[str, list[Event]]:
    """Events per user in time order (ties keep file order); product events carry the product's category."""
    df = read_table(path, EVENTS)
    cols = {c: _text(df, c) for c in ("user_id", "action", "target", "product_id", "text", "category")}
    _require(path, cols["user_id"], "user_id")
    ts = _timestamps(path, df)
    action, pid = cols["action"].str.lower(), cols["product_id"]
    _fail_first(path, ~action.isin(ACTIONS), "action", lambda v: f"{v!r} is not one of {list(ACTIONS)}",
                cols["action"])
    # a blank target on an event that names a product means the product
    target = cols["target"].str.lower().where(cols["target"].ne("") | pid.eq(""), "product")
    allowed = action.map(ACTION_TARGETS)
    bad = pd.Series([t not in a for t, a in zip(target, allowed)], index=df.index)
    _fail_first(path, bad, "target", lambda i: _target_help(action.iloc[i], target.iloc[i]),
                pd.Series(range(len(df))))
    on_product = target.eq("product")
    _require(path, pid, "product_id", on_product)
    unknown = on_product & ~pid.isin(catalog.by_id.keys())
    _fail_first(path, unknown, "product_id", lambda v: f"{v!r} is not in the products table", pid)
    _require(path, cols["text"], "text", action.eq("search"))
    category = cols["category"].where(~on_product, pid.map(lambda p: catalog.by_id[p].category if p in
                                                            catalog.by_id else ""))
    frame = pd.DataFrame({"user_id": cols["user_id"], "ts": ts, "action": action, "target": target,
                          "product_id": pid.where(on_product, ""), "text": cols["text"], "category": category})
    frame = frame.sort_values(["user_id", "ts"], kind="stable")
    events: dict[str, list[Event]] = {}
    for row in frame.itertuples(index=False):
        events.setdefault(row.user_id, []).append(
            Event(row.ts.to_pydatetime(), row.action, row.target, row.product_id, row.text, row.category))
    if not events:
        raise InputError(path, "no event rows")
    return events


def _target_help(action: str, target: str) -> str:
    allowed = [t or "(blank)" for t in ACTION_TARGETS[action]]
    return f"{target or '(blank)'!r} is not a target of a {action!r} event; allowed: {allowed}"


def load_logs(folder: str | Path) -> BehaviourLogs:
    """The events and products tables of `folder`, validated."""
    folder = Path(folder)
    events_path, products_path = find_table(folder, EVENTS), find_table(folder, PRODUCTS)
    catalog = load_products(products_path)
    return BehaviourLogs(catalog, load_events(events_path, catalog))


# --- writing (the generator's logs in the schema; samples for users) -------------------------------


def write_logs(logs: BehaviourLogs, folder: str | Path, fmt: Literal["parquet", "csv"] = "parquet") -> list[Path]:
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    events = pd.DataFrame(
        [(u, e.ts, e.action, e.target, e.product_id, e.text, "" if e.on_product else e.category)
         for u, evs in logs.events.items() for e in evs], columns=list(EVENT_COLUMNS))
    products = pd.DataFrame([(p.product_id, p.category, p.title, p.price, p.brand, list(p.attributes))
                             for p in logs.catalog.products], columns=list(PRODUCT_COLUMNS))
    paths = [folder / f"{EVENTS}.{fmt}", folder / f"{PRODUCTS}.{fmt}"]
    if fmt == "csv":
        events["timestamp"] = events["timestamp"].map(lambda t: t.isoformat())
        products["attributes"] = products["attributes"].map(";".join)
        events.to_csv(paths[0], index=False)
        products.to_csv(paths[1], index=False)
    else:
        events["timestamp"] = pd.to_datetime(events["timestamp"], utc=True)
        events.to_parquet(paths[0], index=False)
        products.to_parquet(paths[1], index=False)
    return paths

