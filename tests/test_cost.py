"""Cost per cell: the client's tally (sent requests with the server's usage and latency, cache hits apart at
their original usage, failures), what shard parts record, the cell/run arithmetic with prices, prices in no
key, and the price's validation. Requests go to a real HTTP server on 127.0.0.1 answering with `usage`."""
from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

import pytest
import yaml

from perseval.llm.settings import Price, Sampling
from perseval.experiment.load import load_experiment
from perseval.llm.usage import Usage
from perseval.pipeline.cost import Spend, UnitRecords, plan_cost, unit_record
from perseval.core.errors import ConfigError
from perseval.llm.cache import RequestCache
from perseval.llm.client import LLMClient
from perseval.llm.endpoint import Endpoint
from perseval.llm.identity import identity_label
from perseval.pipeline.plan import make_plan
from perseval.pipeline.units import shards
from perseval.pipeline.stages import Runtime, construct, judge, run_shard, score
from perseval.core.store import StageStore
from tests.http_stub import JsonHandler, completion, serve

from .conftest import CONFIGS, cpu_overrides, copy_configs

USAGE_IN, USAGE_OUT = 3, 2  # what tests/http_stub.completion reports per request


@pytest.fixture()
def stub():
    """An OpenAI-compatible server answering every chat with usage 3 in / 2 out; status 500 for a text
    containing FAIL. Yields (base url, list of request bodies)."""
    seen: list[dict] = []

    class Handler(JsonHandler):
        def do_POST(self) -> None:
            body = self.request_json()
            seen.append(body)
            if "FAIL" in str(body["messages"]):
                self.reply(500)
                return
            self.reply(200, completion('{"ranking": []}'))

    with serve(Handler) as url:
        yield f"{url}/v1", seen


def _client(url: str, cache: Path, run_id: str = "r") -> LLMClient:
    endpoint = Endpoint("m", "openai", url, "m", "api:abc", None, 4, 10.0, 0)
    return LLMClient(endpoint, Sampling(max_tokens=9), RequestCache(cache), role="agent", run_id=run_id, seed=1)


def _chat_all(client: LLMClient, texts: list[str]) -> None:
    async def go():
        try:
            for t in texts:
                await client.chat([{"role": "user", "content": t}])
        finally:
            await client.aclose()

    asyncio.run(go())


def test_the_client_counts_sent_requests_cache_hits_and_failures_apart(stub, tmp_path):
    url, seen = stub
    first = _client(url, tmp_path / "c.sqlite")
    _chat_all(first, ["a", "b", "FAIL"])
    u = first.usage
    assert (u.requests, u.failed, u.cached) == (2, 1, 0) and len(seen) == 3
    assert (u.tokens_in, u.tokens_out) == (2 * USAGE_IN, 2 * USAGE_OUT)  # the server's usage; a failure has none
    assert u.llm_seconds > 0
    again = _client(url, tmp_path / "c.sqlite", run_id="r2")
    _chat_all(again, ["a", "b", "c"])  # a and b come from the cache; only c is sent
    v = again.usage
    assert len(seen) == 4 and (v.requests, v.cached, v.failed) == (1, 2, 0)
    assert (v.tokens_in, v.tokens_out) == (USAGE_IN, USAGE_OUT)  # new tokens: c only
    assert (v.cached_tokens_in, v.cached_tokens_out) == (2 * USAGE_IN, 2 * USAGE_OUT)  # their original usage
    assert 0 < v.cached_llm_seconds  # and their original latency, not the cache's


def test_spend_separates_this_run_from_total_and_prices_tokens_and_gpu_hours():
    mine = unit_record("now", 1800.0, [Usage(requests=2, tokens_in=600_000, tokens_out=100_000, llm_seconds=30.0,
                                             cached=1, cached_tokens_in=400_000, cached_tokens_out=150_000,
                                             cached_llm_seconds=10.0)])
    older = unit_record("before", 900.0, [Usage(requests=1, tokens_in=1_000_000, tokens_out=250_000,
                                                llm_seconds=20.0)])
    price = Price(input_per_mtok=2.0, output_per_mtok=8.0, per_gpu_hour=3.0)
    s = Spend.of_records([mine, older, None], "now", price, n_devices=2)
    assert (s.tokens_in, s.tokens_out) == (2_000_000, 500_000)  # cache hits at their original usage, all parts
    assert (s.new_tokens_in, s.new_tokens_out) == (600_000, 100_000)  # only what this run sent
    assert (s.llm_seconds, s.new_llm_seconds) == (60.0, 30.0)
    assert (s.wall_seconds, s.new_wall_seconds) == (2700.0, 1800.0)
    assert (s.requests, s.cache_hits, s.unrecorded) == (2, 1, 1)
    # tokens: 2 M in x $2 + 0.5 M out x $8 = $8; GPUs: 2700 s x 2 GPUs x $3/h = $4.5
    assert s.cost_usd == pytest.approx(8.0 + 4.5)
    assert s.new_cost_usd == pytest.approx(0.6 * 2 + 0.1 * 8 + 0.5 * 2 * 3)
    assert Spend.of_records([mine], "now").cost_usd is None  # no price: no dollars, never a made-up 0
    metrics = s.metrics("run")
    assert metrics["run.tokens_in"] == 2_000_000 and metrics["run.this_run.tokens_in"] == 600_000
    assert metrics["run.cost_usd"] == pytest.approx(12.5) and metrics["run.unrecorded_units"] == 1


def _configs(root: Path, price: dict | None) -> Path:
    """The shipped configs plus an API model behind an openai endpoint, and an APeB experiment ranking with it."""
    cfg = root / "configs"
    copy_configs(cfg)
    model = {"name": "stub-api", "format": "api", "source": "stub", "deployment": "stub-endpoint",
             "sampling": {"temperature": 0.0, "max_tokens": 16}}
    if price is not None:
        model["price"] = price
    (cfg / "models" / "stub-api.yaml").write_text(yaml.safe_dump(model))
    (cfg / "deployments" / "stub-endpoint.yaml").write_text(yaml.safe_dump(
        {"name": "stub-endpoint", "kind": "openai", "base_url": "http://127.0.0.1:9/v1", "retries": 0}))
    exp = {"name": "cost", "seed": 3, "shard_size": 2, "backbones": ["stub-api"], "retrievers": [],
           "benchmarks": [{"name": "apeb", "sample": 3, "agents": ["apeb-direct"]}],
           "overrides": cpu_overrides()}
    (cfg / "experiments" / "cost.yaml").write_text(yaml.safe_dump(exp))
    return cfg / "experiments" / "cost.yaml"


def _run_cell(exp, plan, rt: Runtime) -> None:
    (cell,) = plan.cells
    for s in shards(3, 2):
        run_shard(cell.run, s, rt)
        judge(cell.judged, s, rt)
    score(cell, rt)


def test_a_cell_reports_its_tokens_seconds_and_dollars_and_a_cached_redo_spends_nothing(stub, tmp_path):
    url, seen = stub
    exp = load_experiment(_configs(tmp_path, {"input_per_mtok": 1.5, "output_per_mtok": 6.0}))
    plan = make_plan(exp)
    (cell,) = plan.cells
    endpoint = Endpoint("stub-api", "openai", url, "stub", identity_label(exp.models["stub-api"]), None, 4, 10.0, 0)
    root, cache = str(tmp_path / "runs"), str(tmp_path / "cache.sqlite")
    construct(plan.data[0], Runtime(root, "first", cache, 2))
    _run_cell(exp, plan, Runtime(root, "first", cache, 2, endpoints={"stub-api": endpoint}))
    sent = len(seen)
    assert sent >= 3  # at least one ranking request per instance (an unusable ranking is asked again)
    records = UnitRecords(root, {plan.data[0].key: shards(3, 2)})
    cost = plan_cost(exp, plan, records, "first").cells[cell.key]
    assert (cost["run"].tokens_in, cost["run"].tokens_out) == (sent * USAGE_IN, sent * USAGE_OUT)
    assert (cost["run"].new_tokens_in, cost["run"].requests) == (sent * USAGE_IN, sent)
    assert cost["judge"].tokens_in == 0 and cost["judge"].cost_usd is None  # the ranking rule uses no model
    assert cost["cell"].cost_usd == pytest.approx((sent * USAGE_IN * 1.5 + sent * USAGE_OUT * 6.0) / 1e6)
    assert cost["cell"].wall_seconds > 0 and cost["cell"].llm_seconds > 0
    # a later run that finds everything done spends nothing, and the cell still costs what it cost
    later = plan_cost(exp, plan, records, "later").cells[cell.key]["cell"]
    assert (later.tokens_in, later.new_tokens_in, later.new_cost_usd, later.new_wall_seconds) == \
        (cost["cell"].tokens_in, 0, 0.0, 0.0)
    # a run that redoes a lost part gets its answers from the request cache: 0 new tokens, hits counted
    store = StageStore(root, "run", cell.run.key)
    first_part0 = store.part_info(0)["usage"]
    assert first_part0["run_id"] == "first" and first_part0["requests"] >= 2 and first_part0["cached"] == 0
    store.part_path(0).unlink()
    _run_cell(exp, plan, Runtime(root, "redo", cache, 2, endpoints={"stub-api": endpoint}))
    assert len(seen) == sent
    redo = plan_cost(exp, plan, records, "redo").cells[cell.key]["run"]
    assert (redo.new_tokens_in, redo.new_tokens_out, redo.requests) == (0, 0, 0)
    assert redo.cache_hits == first_part0["requests"]
    assert redo.tokens_in == sent * USAGE_IN  # the total is unchanged: cached answers keep their usage


def test_a_price_changes_no_key(tmp_path):
    priced = make_plan(load_experiment(_configs(tmp_path / "a", {"input_per_mtok": 1.0, "output_per_mtok": 2.0})))
    unpriced = make_plan(load_experiment(_configs(tmp_path / "b", None)))
    keys = [[u.key for u in p.data] + [c.run.key for c in p.cells] + [c.judged.key for c in p.cells] +
            [c.key for c in p.cells] for p in (priced, unpriced)]
    assert keys[0] == keys[1] and keys[0]


@pytest.mark.parametrize("price, message", [
    ({}, "at least one of"),
    ({"input_per_mtok": -1}, "input_per_mtok"),
    ({"per_hour": 1}, "per_hour"),
    ({"per_gpu_hour": 2.0}, "bills tokens, not GPU hours"),  # the stub model is behind an openai endpoint
])
def test_a_bad_price_is_refused_naming_the_file_and_key(tmp_path, price, message):
    with pytest.raises(ConfigError) as err:
        load_experiment(_configs(tmp_path, price))
    assert "stub-api.yaml" in str(err.value) and message in str(err.value)


def _rendered(cells: list) -> str:
    from rich.console import Console

    from perseval.report.views.cost import cost_table

    console = Console(record=True, width=200)
    console.print(cost_table(cells))
    return console.export_text()


def test_the_cost_table_shows_total_and_this_run_and_dollars_only_when_priced():
    from perseval.report.record import Cost
    from tests.record_helpers import cell as record_cell

    def cell(agent: str, usd: float | None = None, new_usd: float | None = None):
        return record_cell("iba", agent, "j", 50.0).model_copy(update={"cost": Cost(
            tokens_in=1200, tokens_out=300, llm_seconds=12.34, wall_seconds=20.0, cost_usd=usd, new_tokens_in=0,
            new_tokens_out=0, new_cost_usd=new_usd)})

    text = _rendered([cell("rag")])
    assert "iba/rag" in text and "1200; 0" in text and "300; 0" in text and "12.3" in text
    assert "USD" not in text
    priced = _rendered([cell("rag"), cell("b", 0.0125, 0.0)])
    assert "USD" in priced and "0.0125; 0.0000" in priced
    unpriced_line = next(line for line in priced.splitlines() if "iba/rag" in line)
    assert unpriced_line.rstrip().endswith("- │")  # a cell whose models have no price: no dollars, not 0


def test_a_gpu_hour_price_is_paid_for_every_gpu_of_a_vllm_deployment_and_changes_no_key(tmp_path):
    from perseval.pipeline.cost import devices

    cfg = tmp_path / "configs"
    copy_configs(cfg)
    before = make_plan(load_experiment(cfg / "experiments" / "gpu.yaml"))
    path = cfg / "models" / "qwen3-30b-a3b-instruct.yaml"
    path.write_text(path.read_text() + "price: {per_gpu_hour: 3.5}\n")
    exp = load_experiment(cfg / "experiments" / "gpu.yaml")
    model = exp.models["qwen3-30b-a3b-instruct"]
    assert model.price.per_gpu_hour == 3.5 and devices(exp.deployments[model.name]) == 2
    record = unit_record("now", 3600.0, [Usage(requests=1, tokens_in=10, tokens_out=10)])
    assert Spend.of_records([record], "now", model.price, devices(exp.deployments[model.name])).cost_usd == 7.0
    after = make_plan(exp)
    assert [c.key for c in after.cells] == [c.key for c in before.cells]
    assert [u.key for u in after.data] == [u.key for u in before.data]
