"""IBA-Bench construction at scale: Table 2 distributions, combined evidence, full size, streaming, LLM mode."""
from __future__ import annotations

import asyncio
import dataclasses
import re
from dataclasses import asdict
from pathlib import Path

import pytest
import yaml

from perseval.benchmarks.iba import distribution as dist
from perseval.benchmarks.iba.taxonomy import load_taxonomy
from perseval.benchmarks.iba.benchmark import IbaBenchmark
from perseval.benchmarks.iba.construct import ConstructParams, construct
from perseval.benchmarks.evidence_kinds import TABLE12
from perseval.benchmarks.iba.evidence import RETENTION_THRESHOLD
from perseval.benchmarks.base import build_all
from perseval.benchmarks.iba.llm_construct import Writers
from perseval.benchmarks.iba.taxonomy import Scenario, Taxonomy
from perseval.core.errors import ConfigError
from perseval.core.instances import Document, Instance
from perseval.core.store import StageStore
from tests.scripted import ScriptedChat

ROOT = Path(__file__).resolve().parents[1]
YAML = ROOT / "perseval/benchmarks/iba/scenarios.yaml"


# --- helpers ------------------------------------------------------------------------------


def by_owner(docs: list[Document]) -> dict[str, list[Document]]:
    out: dict[str, list[Document]] = {}
    for d in docs:
        out.setdefault(d.owner, []).append(d)
    return out


def supports(doc: Document) -> list[dict]:
    return doc.meta.get("supports") or []


def gold_by_dimension(inst: Instance, tax: Taxonomy) -> dict[str, str]:
    """Checkpoints, or gold slots mapped back to their dimensions."""
    if inst.payload["action_type"] == "generate":
        return {c["dimension"]: c["value"] for c in inst.gold["checkpoints"]}
    slot_dim = {s.name: s.dimension for s in tax.scenario(inst.payload["scenario"]).api.personal_slots}
    return {slot_dim[n]: v for n, v in inst.gold["slots"].items()}


@dataclasses.dataclass(frozen=True)
class CountedScenario(Scenario):
    """A scenario with Table 13's I, as the extended taxonomy will provide it."""

    instances: int | None = None


def wide_taxonomy(dims: int = 8, per_domain: int = 2, counts: dict[str, list[int]] | None = None) -> Taxonomy:
    """All nine Table 2 domains, built from the bundled scenarios with `dims` dimensions each (copies)."""
    base = load_taxonomy()
    gen, api = base.scenario("Weekly plan"), base.scenario("Ticket booking")
    scenarios = []
    for domain in [d for d in dist.TABLE2 if d != dist.OVERALL]:
        for k in range(per_domain):
            src = gen if k % 2 == 0 else api
            extra = tuple(dataclasses.replace(d, id=f"{d.id}_{j}", name=f"{d.name} {j}")
                          for j in range(dims // len(src.dimensions) + 1) for d in src.dimensions)[:dims]
            api_t = None
            if src.api is not None:
                slots = [s for s in src.api.slots if not s.personalized]
                slots += [dataclasses.replace(src.api.personal_slots[0], name=d.id, dimension=d.id,
                                              values=tuple(d.value_ids)) for d in extra]
                api_t = dataclasses.replace(src.api, slots=tuple(slots))
            i = (counts or {}).get(domain, [None] * per_domain)[k]
            scenarios.append(CountedScenario(domain, f"{domain} {k}", src.action_type, src.dynamic, extra,
                                             src.tasks, src.cases, api_t, instances=i))
    return Taxonomy(tuple(scenarios), "test")


def build(sample=30, seed=5, **params) -> object:
    params.setdefault("noise_per_evidence", 2)
    params.setdefault("distribution", "table2")
    return IbaBenchmark(params).build(sample=sample, seed=seed, source=None)


# --- Table 2 as data ----------------------------------------------------------------------


def test_table2_rows_add_up_to_the_overall_row():
    rows = [r for d, r in dist.TABLE2.items() if d != dist.OVERALL]
    overall = dist.TABLE2[dist.OVERALL]
    assert sum(r.instances for r in rows) == overall.instances == dist.FULL_SIZE == 6962
    assert sum(r.scenarios for r in rows) == 66 and sum(r.dimensions for r in rows) == 262
    for r in rows + [overall]:
        assert sum(r.evidence) == sum(r.constraints) == r.instances
    for i in range(5):
        assert sum(r.evidence[i] for r in rows) == overall.evidence[i]
        assert sum(r.constraints[i] for r in rows) == overall.constraints[i]


def test_largest_remainder_is_exact_and_proportional():
    out = dist.largest_remainder({"a": 1, "b": 1, "c": 1}, 10)
    assert sum(out.values()) == 10 and sorted(out.values()) == [3, 3, 4]
    assert dist.largest_remainder({"a": 0.0}, 5) == {"a": 0}


# --- construction follows Table 2 ---------------------------------------------------------


def test_table2_build_is_deterministic_for_a_seed():
    a, b, c = build(seed=3), build(seed=3), build(seed=4)
    assert [asdict(i) for i in a.instances] == [asdict(i) for i in b.instances]
    assert [asdict(d) for d in a.documents] == [asdict(d) for d in b.documents]
    assert [asdict(d) for d in a.documents] != [asdict(d) for d in c.documents]


def test_distribution_matches_table2_per_domain():
    tax = wide_taxonomy(dims=8)
    data = construct(tax, sample=1200, seed=1, params=ConstructParams(noise_per_evidence=0, distribution="table2"))
    domains = [d for d in dist.TABLE2 if d != dist.OVERALL]
    by_domain = data.info["by_domain"]
    for d in domains:  # instances per domain follow Table 2's I
        assert by_domain[d] / 1200 == pytest.approx(dist.TABLE2[d].instances / 6962, abs=0.002)
    for d in domains:
        row, insts = dist.TABLE2[d], [i for i in data.instances if i.group == d]
        for field, counts in (("n_evidence", row.evidence), ("n_constraints", row.constraints)):
            got = dist.histogram([i.payload[field] for i in insts])
            for b, want in zip(dist.BUCKETS, counts):
                assert got[b] / len(insts) == pytest.approx(want / row.instances, abs=0.02), (d, field, b)
    assert data.info["clamped_constraints"] == 0
    report = data.info["table2"]
    assert all(r["evidence"]["target"] == r["evidence"]["achieved"] for r in report.values())
    assert all(r["constraints"]["target"] == r["constraints"]["achieved"] for r in report.values())


def test_constraints_never_exceed_a_scenarios_dimensions_and_clamps_are_reported():
    data = build(sample=120)
    tax = load_taxonomy()
    for inst in data.instances:
        assert inst.payload["n_constraints"] <= len(tax.scenario(inst.payload["scenario"]).dimensions)
    # a domain with no scenario of five dimensions cannot hold Table 2's 5+ constraints: clamped, and said so
    widest = {d: max(len(s.dimensions) for s in tax.scenarios if s.domain == d) for d in tax.domains}
    must = sum(r["constraints"]["target"]["5+"] for d, r in data.info["table2"].items() if widest[d] < 5)
    assert data.info["clamped_constraints"] >= must


def test_full_size_counts_follow_table2_and_table13():
    assert sum(dist.full_scenario_counts(wide_taxonomy()).values()) == 6962
    counts = {"Medical Services": [210, None], "Leisure Activities": [229, 6]}
    full = dist.full_scenario_counts(wide_taxonomy(counts=counts))
    assert full["Leisure Activities 0"] == 229 and full["Leisure Activities 1"] == 6  # Table 13's I where given
    assert full["Medical Services 0"] == 210 and full["Medical Services 1"] == 524 - 210  # the rest of the domain
    assert sum(full.values()) == 6962 - (333 - 235)  # a fully given domain counts what its scenarios say
    assert full["Work 0"] + full["Work 1"] == 1155 and abs(full["Work 0"] - full["Work 1"]) <= 1  # else even
    partial = Taxonomy(wide_taxonomy().scenarios[:4], "part")  # two domains only: the rest is reported missing
    assert dist.missing_domains(partial) == [d for d in dist.TABLE2 if d not in partial.domains + [dist.OVERALL]]
    assert sum(dist.full_scenario_counts(partial).values()) == 750 + 1155
    assert ConstructParams().is_full_size(6962) and ConstructParams(full_size=True).uses_table2(10)


def test_full_size_build_has_the_papers_counts():
    data = construct(wide_taxonomy(dims=8), sample=1, seed=2,
                     params=ConstructParams(noise_per_evidence=0, full_size=True))
    info = data.info
    assert info["n_instances"] == 6962 and info["full_size"] and info["missing_domains"] == []
    overall = dist.TABLE2[dist.OVERALL]
    assert [info["evidence_hist"].get(b, 0) for b in dist.BUCKETS] == list(overall.evidence)
    assert [info["constraints_hist"].get(b, 0) for b in dist.BUCKETS] == list(overall.constraints)
    assert {d: n for d, n in info["by_domain"].items()} == {d: r.instances for d, r in dist.TABLE2.items()
                                                             if d != dist.OVERALL}


# --- ground truth ---------------------------------------------------------------------------


@pytest.mark.parametrize("params", [{"distribution": "table2", "dynamic_rate": 0.7}, {"dynamic_rate": 0.7}])
def test_every_gold_item_is_supported_and_dynamic_values_change_in_order(params):
    data = build(sample=60, seed=9, **params)
    tax, owners = load_taxonomy(), by_owner(data.documents)
    n_dynamic = 0
    for inst in data.instances:
        docs = sorted(owners[inst.user_id], key=lambda d: d.timestamp)
        ev = [d for d in docs if supports(d)]
        assert len(ev) == inst.payload["n_evidence"] and len(ev) == sum("dimension" in d.meta for d in docs)
        gold = gold_by_dimension(inst, tax)
        assert len(gold) == inst.payload["n_constraints"] == len(inst.gold["preferences"])
        latest: dict[str, dict] = {}
        for d in ev:
            assert d.meta["scenario"] == inst.payload["scenario"]
            assert {s["dimension"] for s in supports(d)} <= set(gold)  # evidence only for constrained dimensions
            phases = {(s["dimension"], s["dynamic_phase"]) for s in supports(d)}
            assert not any((dim, "old") in phases and (dim, "new") in phases for dim in gold)
            latest.update({s["dimension"]: s for s in supports(d)})
        assert {dim: s["value"] for dim, s in latest.items()} == gold  # the latest signal states the gold
        for pref in inst.gold["preferences"]:
            mine = [(d.timestamp, s) for d in ev for s in supports(d) if s["dimension"] == pref["dimension"]]
            stamps = {ph: [t for t, s in mine if s["dynamic_phase"] == ph] for ph in ("old", "new")}
            if pref["dynamic"]:
                n_dynamic += 1
                assert stamps["old"] and stamps["new"] and max(stamps["old"]) < min(stamps["new"])
                assert {s["value"] for d in ev for s in supports(d) if s["dimension"] == pref["dimension"]
                        and s["dynamic_phase"] == "old"} == {pref["previous"]}
            else:
                assert not stamps["old"] and not stamps["new"]
        assert inst.payload["dynamic"] == (inst.gold["n_dynamic"] > 0)
    assert n_dynamic >= 5 and data.info["n_dynamic_preferences"] == n_dynamic


def test_one_turn_can_back_several_constraints():
    data = build(sample=80, seed=4)
    owners = by_owner(data.documents)
    packed = [i for i in data.instances if i.payload["n_evidence"] < i.payload["n_constraints"]]
    assert packed and data.info["combined_evidence_turns"] > 0
    for inst in packed:
        ev = [d for d in owners[inst.user_id] if supports(d)]
        assert sum(len(supports(d)) for d in ev) >= inst.payload["n_constraints"]
        assert any(len(supports(d)) > 1 for d in ev)
    single = [i for i in data.instances if i.payload["n_evidence"] == 1]
    assert single and all(i.gold["n_dynamic"] == 0 for i in single)  # a change needs two turns


def test_evidence_carries_table12_types_and_salience():
    data = build(sample=40)
    for d in data.documents:
        if not supports(d):
            assert d.meta == {"kind": "noise"}
            continue
        for s in supports(d):
            category, low, high = TABLE12[s["kind"]]
            assert s["evidence_type"] == category and low <= s["salience"] <= high
        assert d.meta["salience"] == min(10, sum(s["salience"] for s in supports(d)))
        assert {k: d.meta[k] for k in ("dimension", "value", "kind")} == \
               {k: supports(d)[0][k] for k in ("dimension", "value", "kind")}
    info = data.info
    assert set(info["evidence_types"]) <= {c for c, _, _ in TABLE12.values()}
    assert info["turns_at_retention_threshold"] == sum(1 for d in data.documents
                                                       if supports(d) and d.meta["salience"] >= RETENTION_THRESHOLD)


@pytest.mark.parametrize("ratio", [100, 7.5])
def test_noise_ratio_is_about_one_relevant_turn_per_hundred(ratio):
    params = {} if ratio == 100 else {"noise_per_evidence": ratio}
    data = IbaBenchmark({"distribution": "table2", **params}).build(sample=12, seed=1, source=None)
    n_ev = sum(1 for d in data.documents if supports(d))
    n_noise = sum(1 for d in data.documents if d.meta.get("kind") == "noise")
    assert n_ev + n_noise == len(data.documents)
    assert n_noise / n_ev == pytest.approx(ratio, rel=0.05)
    assert data.info["noise_ratio"] == pytest.approx(n_noise / n_ev)


def test_bad_params_are_refused():
    with pytest.raises(ConfigError, match="distribution"):
        IbaBenchmark({"distribution": "zipf"})
    with pytest.raises(ConfigError, match="full_size"):
        IbaBenchmark({"full_size": "maybe"})


# --- one writer per data key ----------------------------------------------------------------


def _unit(params: dict, sample: int, seed: int, key: str = "k"):
    from perseval.benchmarks.iba.benchmark import IbaBenchmark
    from perseval.experiment.config import BenchmarkEntry
    from perseval.pipeline.units import DataUnit

    entry = BenchmarkEntry(name="iba", sample=sample, params=params, agents=["x"])
    return DataUnit(key, entry, seed, IbaBenchmark(params).params)


def _runtime(root):
    from perseval.pipeline.stages import Runtime

    return Runtime(str(root), "test", str(root / "cache.sqlite"), 4)


def test_streamed_build_equals_the_in_memory_build(tmp_path):
    from perseval.pipeline.stages import construct as construct_stage

    params = {"noise_per_evidence": 3, "distribution": "table2", "part_size": 7}
    mem = construct(load_taxonomy(), sample=25, seed=8, params=ConstructParams(noise_per_evidence=3,
                                                                                distribution="table2"))
    out = construct_stage(_unit(params, 25, 8), _runtime(tmp_path))
    data, docs = StageStore(tmp_path, "data", "k"), StageStore(tmp_path, "documents", "k")
    assert len(data.parts()) == len(docs.parts()) == 4  # 25 instances in parts of 7
    got = data.read_records(Instance)
    assert [asdict(i) for i in got] == [asdict(i) for i in sorted(mem.instances, key=lambda i: i.instance_id)]
    assert [asdict(d) for d in docs.read_records(Document)] == [asdict(d) for d in mem.documents]
    assert out.n_instances == 25 and out.info == mem.info and data.is_complete()
    assert out.shard_ids == tuple(range(7))  # 25 instances in shards of 4 (the runtime's)


def test_an_unfinished_key_is_rebuilt_by_its_one_writer_never_mixed(tmp_path):
    """An interrupted build leaves parts of a larger build in a key without a manifest: the next build of that
    key must not read them back (this used to give 20 instances where the manifest said 12)."""
    from perseval.pipeline.stages import construct as construct_stage, load_instances

    rt = _runtime(tmp_path)
    construct_stage(_unit({"noise_per_evidence": 2, "part_size": 4}, 20, 1), rt)  # 5 parts
    data = StageStore(tmp_path, "data", "k")
    (data.dir / "_manifest.json").unlink()  # as if interrupted before it finished
    out = construct_stage(_unit({"noise_per_evidence": 2, "part_size": 4}, 12, 1), rt)
    got = load_instances(str(tmp_path), "k")
    assert out.n_instances == len(got) == len({i.instance_id for i in got}) == 12
    assert len(data.parts()) == 3
    docs = StageStore(tmp_path, "documents", "k").read_records(Document)
    assert len(docs) == len({d.doc_id for d in docs}) == out.n_documents


def test_a_deleted_part_makes_the_key_incomplete(tmp_path):
    from perseval.pipeline.freshness import data_done
    from perseval.pipeline.stages import construct as construct_stage

    unit = _unit({"noise_per_evidence": 2, "part_size": 4}, 8, 1)
    construct_stage(unit, _runtime(tmp_path))
    assert data_done(str(tmp_path), unit)
    StageStore(tmp_path, "data", "k").part_path(1).unlink()
    assert not data_done(str(tmp_path), unit)


# --- LLM mode ---------------------------------------------------------------------------------

def role_of(messages) -> str:
    system = messages[0]["content"]
    return "task" if "requests users send" in system else "assistant" if "helpful AI assistant" in system else "user"


def scripted_writer(messages) -> str:
    role, prompt = role_of(messages), messages[-1]["content"]
    if role == "task":
        keep = re.findall(r'"([^"]+)"', prompt.split("word for word:")[1])
        return "Could you help me out: " + ", ".join(keep) + "."
    if role == "assistant":
        return "Assistant: Sure thing."
    dims = re.findall(r"^- ([^:]+):", prompt, re.M)
    return "User: Written by the simulator about " + " and ".join(dims) + ".\nAssistant: (should be cut)"


def llm_data(writers: Writers, **llm) -> tuple[object, object]:
    params = {"noise_per_evidence": 3, "distribution": "table2", "dynamic_rate": 0.6}
    template = IbaBenchmark(params).build(sample=10, seed=6, source=None)
    bench = IbaBenchmark({**params, "construction": {"mode": "llm", **llm}})
    data = build_all(bench, sample=10, seed=6, source=None,
                     models={"user": writers.user, "assistant": writers.assistant, "task": writers.task})
    return template, data


def test_llm_mode_has_the_template_schema_and_ground_truth():
    chat = ScriptedChat(scripted_writer)
    template, data = llm_data(Writers(chat, chat, chat))
    strip = lambda i: {**asdict(i), "query": None}  # noqa: E731
    assert [strip(i) for i in data.instances] == [strip(i) for i in template.instances]
    assert [(d.doc_id, d.owner, d.timestamp, d.meta) for d in data.documents] == \
           [(d.doc_id, d.owner, d.timestamp, d.meta) for d in template.documents]
    for t, d in zip(template.documents, data.documents):
        if supports(d):
            assert d.text.startswith("User: Written by the simulator about")
            assert d.text.endswith("Assistant: Sure thing.")
            assert "(should be cut)" not in d.text
        else:
            assert d.text == t.text  # noise keeps its template text by default
    for t, i in zip(template.instances, data.instances):
        assert i.query.startswith("Could you help me out")
        assert all(str(v) in i.query for v in t.gold["task_case"].values())
    n_ev = sum(1 for d in data.documents if supports(d))
    assert data.info["llm"]["rewritten.evidence"] == n_ev and data.info["mode"] == "llm"
    assert data.info["llm"]["requests.task"] == 10 and not any(k.startswith("fallback") for k in data.info["llm"])
    briefs = [c["messages"] for c in chat.calls if role_of(c["messages"]) == "user"]
    assert any("You used to prefer" in m[-1]["content"] for m in briefs)  # dynamic turns tell what changed
    assert all(m[0]["content"].startswith("You are a") for m in briefs)  # spoken as the persona


def test_llm_mode_keeps_template_text_when_a_model_fails_or_drops_details():
    failing, echo = ScriptedChat(None), ScriptedChat("Make it nice.")
    template, data = llm_data(Writers(user=failing, assistant=echo, task=echo))
    assert [asdict(d) for d in data.documents] == [asdict(d) for d in template.documents]
    assert [i.query for i in data.instances] == [i.query for i in template.instances]
    stats = data.info["llm"]
    assert stats["fallback.task"] == 10 and stats["failed.user"] == stats["fallback.evidence"] > 0


def test_llm_mode_can_rewrite_noise_and_streams_to_the_store(tmp_path):
    chat = ScriptedChat(scripted_writer)
    bench = IbaBenchmark({"noise_per_evidence": 2, "distribution": "table2", "part_size": 3,
                          "construction": {"mode": "llm", "rewrite_noise": True}})
    data = build_all(bench, sample=4, seed=1, source=None, models={"user": chat, "assistant": chat, "task": chat})
    assert all(d.text.startswith("User: Written by the simulator") for d in data.documents)
    assert data.info["llm"]["rewritten.noise"] == data.info["n_noise"] and data.info["mode"] == "llm"
    with pytest.raises(ValueError, match="roles"):
        build_all(bench, sample=1, seed=1, source=None, models={"user": chat})


def _experiment(tmp_path, construction: dict | None = None, model_file: str | None = None):
    """The quickstart's IBA entry in a config tree of its own (models copied, so a test may change one)."""
    from perseval.experiment.load import load_experiment

    configs = tmp_path / "configs"
    (configs / "experiments").mkdir(parents=True, exist_ok=True)
    for kind in ("retrievers", "judges", "agents", "deployments", "models"):
        if not (configs / kind).exists():
            (configs / kind).symlink_to(ROOT / "configs" / kind) if kind != "models" else \
                __import__("shutil").copytree(ROOT / "configs" / kind, configs / kind)
    if model_file:
        cfg = yaml.safe_load((configs / "models" / "smollm2-135m.yaml").read_text())
        cfg["source"] = model_file
        (configs / "models" / "smollm2-135m.yaml").write_text(yaml.safe_dump(cfg))
    exp = yaml.safe_load((ROOT / "configs/experiments/quickstart.yaml").read_text())
    params = {"noise_per_evidence": 1, **({"construction": construction} if construction else {})}
    exp["benchmarks"] = [{"name": "iba", "sample": 1, "params": params, "agents": ["iba-oracle"]}]
    path = configs / "experiments" / "construct.yaml"
    path.write_text(yaml.safe_dump(exp))
    return path, load_experiment(path)


def test_llm_construction_is_in_the_data_key_with_the_models_identity(tmp_path):
    from perseval.pipeline.plan import make_plan

    _, template = _experiment(tmp_path / "t")
    _, llm = _experiment(tmp_path / "l", {"mode": "llm"})
    _, noisy = _experiment(tmp_path / "n", {"mode": "llm", "rewrite_noise": True})
    plan = make_plan(llm)
    assert {r: m.name for r, m in plan.data[0].construction.items()} == \
        {"user": "smollm2-135m", "assistant": "smollm2-135m", "task": "smollm2-135m"}
    keys = {make_plan(x).data[0].key for x in (template, llm, noisy)}
    assert len(keys) == 3
    # new weights for the constructing model give a new data key, as they give new runs
    weights = tmp_path / "other.gguf"
    weights.write_bytes(b"GGUF not the same weights")
    _, other = _experiment(tmp_path / "o", {"mode": "llm"}, model_file=str(weights))
    assert make_plan(other).data[0].key != plan.data[0].key
    with pytest.raises(ConfigError, match="user_model"):
        _experiment(tmp_path / "x", {"mode": "llm", "user_model": "gpt-nine"})


@pytest.mark.integration
def test_perseval_construct_writes_the_key_perseval_run_reads_in_llm_mode(tmp_path, prefect_api, monkeypatch):
    """`perseval construct` is the evaluate flow's construct stage: its LLM-mode data (models started for
    the build) lands under the data key the plan of `perseval run` computes, and is reused as is."""
    monkeypatch.setenv("PREFECT_API_URL", prefect_api)
    from perseval_flows.evaluate import evaluate
    from perseval.llm.cache import RequestCache
    from perseval.pipeline.plan import make_plan

    path, exp = _experiment(tmp_path, {"mode": "llm", "max_tokens": 24})
    root = tmp_path / "runs"
    out = evaluate(str(path), output_root=str(root), stop_after="construct", show_progress=False)
    key = make_plan(exp).data[0].key
    assert list(out["data"]) == [key] and out["data"][key]["info"]["mode"] == "llm"
    written = out["data"][key]["info"]["llm"]
    assert written["requests.task"] == 1 and written.get("rewritten.evidence", 0) > 0
    cache = RequestCache(root / "request-cache.sqlite")
    assert sum(cache.request_counts(out["run_id"]).get("construct.user", {}).values()) > 0
    again = evaluate(str(path), output_root=str(root), stop_after="construct", show_progress=False)
    assert cache.request_counts(again["run_id"]) == {} and not list((root / "logs").glob("smollm2-135m-*.log"))[1:]
