"""Swapped-history controls: the derangement, the plan's control variants (plain keys untouched), the
swapped context, and known-answer fixtures on real computed runs (construct, run, rule judge, score):
IBA's oracle under the swap falls to the score of a wrong-user answer, and a ranking agent that reads
the history but ignores it has a personalization gain of exactly 0."""
from __future__ import annotations

import asyncio

import pytest
import yaml

from perseval.agents.base import AgentContext
from perseval.benchmarks.apeb.agents.random_ranker import APeBRandom
from perseval.experiment.load import load_experiment
from perseval.pipeline.controls import SWAPPED_HISTORY, derangement, history_owners, owner_swap, swapped_context, Control
from perseval.core.instances import InstanceScore
from perseval.metrics.aggregate import per_instance, scores_frame
from perseval.pipeline.plan import make_plan
from perseval.core.instances import AgentOutput, Document, Instance, Passage
from perseval.kernel.registry import register_agent
from perseval.pipeline.stages import Runtime, load_instances
from perseval.core.store import StageStore

from .conftest import CONFIGS
from .plan_runs import _compute, _tree
from perseval.experiment.load import experiment_file


def instance_values(root: str, cell) -> dict[str, float]:
    """Instance id -> the cell's headline metric (mean over repeats; NaN: unscored), as the score stage wrote it."""
    store = StageStore(root, "score", cell.key)
    frame = per_instance(scores_frame(store.read_records(InstanceScore)))
    rows = frame[frame["metric"] == store.manifest().get("headline_metric")]
    return {str(i): float(v) for i, v in zip(rows["instance_id"], rows["value"])}


@register_agent("test.apeb-history-blind")
class HistoryBlindRanker(APeBRandom):
    """Reads the user's history, then ranks exactly as the random ranker does: history cannot matter."""

    needs = frozenset({"documents"})

    async def act(self, instance, ctx, repeat, name):
        assert ctx.documents is not None and ctx.documents(instance.user_id)  # it is given a history
        return await super().act(instance, ctx, repeat, name)


def _inst(iid: str, user: str, group: str = "g", scenario: str = "s") -> Instance:
    return Instance(iid, "b", user, group, "q", {"scenario": scenario})


# --- the derangement -----------------------------------------------------------------------------------------

def test_the_derangement_leaves_no_user_with_their_own_history_and_is_seeded():
    insts = [_inst(f"i{k}", f"u{k}", scenario=f"s{k % 3}") for k in range(11)]
    swap = derangement(insts, 7)
    assert set(swap) == set(swap.values()) == {f"u{k}" for k in range(11)}  # a permutation of the users
    assert all(a != b for a, b in swap.items())  # no fixed point
    assert swap == derangement(list(reversed(insts)), 7)  # the order instances come in does not matter
    assert any(derangement(insts, s) != swap for s in range(8, 12))  # another seed, another derangement


def test_users_are_swapped_within_their_scenario_where_the_data_allows():
    insts = [_inst(f"i{k}", f"u{k}", scenario="A" if k < 4 else "B") for k in range(7)] + [_inst("z", "solo", "h", "C")]
    swap = derangement(insts, 1)
    scenario = {i.user_id: i.payload["scenario"] for i in insts}
    assert all(scenario[swap[u]] == scenario[u] for u in swap if u != "solo" and swap.get(u) != "solo")
    assert swap["solo"] != "solo"  # the one user alone in its stratum still gets another user's history
    assert derangement([_inst("i", "only")], 1) == {}  # one user in all: nobody to swap with


def test_the_swapped_context_answers_a_user_with_the_other_users_history_and_leaves_the_corpus():
    asked: list[str] = []

    async def retrieve(owner: str, query: str, k: int) -> list[Passage]:
        asked.append(owner)
        return []

    docs = {"a": [Document("a", "da", "x")], "b": [Document("b", "db", "y")]}
    search = object()
    ctx = swapped_context(AgentContext(retrieve=retrieve, documents=lambda o: docs.get(o, []), search=search),
                          {"a": "b", "b": "a"})
    asyncio.run(ctx.retrieve("a", "q", 3))
    asyncio.run(ctx.retrieve("__corpus__", "q", 3))
    assert asked == ["b", "__corpus__"] and ctx.documents("a")[0].doc_id == "db"
    assert ctx.search is search  # same search results: the query's, not the user's
    assert history_owners([_inst("i", "a")], {"a": "b"}) == {"b"}
    assert owner_swap(None, []) is None
    with pytest.raises(ValueError, match="unknown control"):
        owner_swap(Control("other", 1), [])


# --- the plan ---------------------------------------------------------------------------------------------------

def test_controls_add_runs_for_history_agents_only_and_leave_every_plain_key_as_it_was(tmp_path):
    base = make_plan(load_experiment(CONFIGS / "experiments" / "quickstart.yaml"))
    data = yaml.safe_load((CONFIGS / "experiments" / "quickstart.yaml").read_text())
    on = make_plan(load_experiment(_tree(tmp_path, {**data, "name": "q2", "controls": [SWAPPED_HISTORY]})))
    plain = {c.name: c.key for c in on.cells if c.run.control is None}
    # same cells, same score keys (and so run/judge keys); the quickstart's LaMP entry has its own control already
    assert plain == {c.name: c.key for c in base.cells if c.run.control is None}
    assert [a.key for a in on.analyses] == [a.key for a in base.analyses]  # the paper's tables: unchanged
    controlled = {(c.benchmark, c.agent) for c in on.cells if c.run.control is not None}
    # history agents only: no oracle reading gold, no no-history agent; the IBA oracle reads the history's tags
    assert controlled == {("iba", "iba-rag"), ("iba", "iba-oracle"), ("bespoke", "bespoke-raw-history"),
                          ("apeb", "apeb-direct"), ("lamp", "lamp-rag")}
    swapped = [c for c in on.cells if c.run.control is not None]
    assert all(c.name.endswith(f"[{SWAPPED_HISTORY}]") and c.key not in plain.values() for c in swapped)
    assert len({c.run.key for c in swapped}) == len({(c.agent, c.backbone, c.retriever) for c in swapped})


def test_a_benchmark_entry_can_switch_controls_off(tmp_path):
    data = yaml.safe_load((CONFIGS / "experiments" / "quickstart.yaml").read_text())
    data["controls"] = [SWAPPED_HISTORY]
    data["benchmarks"][1]["controls"] = []
    plan = make_plan(load_experiment(_tree(tmp_path, {**data, "name": "q3"})))
    assert {c.benchmark for c in plan.cells if c.run.control} == {"iba", "apeb", "lamp"}  # LaMP's entry: its own


# --- known answers on computed runs --------------------------------------------------------------------------------

def test_the_iba_oracle_under_the_swap_scores_what_the_other_users_answer_scores(tmp_path):
    exp = {"name": "t", "seed": 5, "shard_size": 4, "backbones": ["smollm2-135m"], "retrievers": [],
           "judges": ["smollm2-judge"], "controls": [SWAPPED_HISTORY],
           "benchmarks": [{"name": "iba", "sample": 6, "agents": ["iba-oracle"],
                           "params": {"noise_per_evidence": 2, "scenarios": ["Food ordering"]}}]}
    plan = make_plan(load_experiment(_tree(tmp_path, exp)))
    root = str(tmp_path / "runs")
    rt = Runtime(root, "r", str(tmp_path / "c.sqlite"), 4)
    cells = {c.run.control is not None: c for c in plan.cells if c.judge == "iba.slots"}
    _compute(plan, root, rt, cells.values())
    own, swapped = instance_values(root, cells[False]), instance_values(root, cells[True])
    insts = {i.instance_id: i for i in load_instances(root, plan.data[0].key)}
    gold_of = {i.user_id: i.gold["slots"] for i in insts.values()}
    swap = derangement(insts.values(), 5)
    # the wrong-user answer: the other user's own preferences, scored against this user's gold
    wrong = {iid: 100.0 * sum(gold_of[swap[i.user_id]].get(s) == v for s, v in i.gold["slots"].items())
             / len(i.gold["slots"]) for iid, i in insts.items()}
    assert set(own.values()) == {100.0}
    assert swapped == pytest.approx(wrong)
    assert sum(swapped.values()) / len(swapped) < 80.0  # far below the oracle with its own user's history
    outs = StageStore(root, "run", cells[True].run.key).read_records(AgentOutput)
    assert all(o.trace[-1]["history_of"] == swap[insts[o.instance_id].user_id] for o in outs)


def test_a_ranking_agent_that_ignores_the_history_gains_exactly_nothing_from_it(tmp_path):
    exp = {"name": "t", "seed": 3, "shard_size": 4, "backbones": ["smollm2-135m"], "retrievers": [],
           "controls": [SWAPPED_HISTORY],
           "benchmarks": [{"name": "apeb", "sample": 4, "agents": ["apeb-blind", "apeb-random"]}]}
    path = _tree(tmp_path, exp, {"apeb-blind": {"kind": "test.apeb-history-blind"}})
    plan = make_plan(load_experiment(path))
    assert not [c for c in plan.cells if c.agent == "apeb-random" and c.run.control]  # no history: no control
    cells = {c.run.control is not None: c for c in plan.cells if c.agent == "apeb-blind"}
    root = str(tmp_path / "runs")
    _compute(plan, root, Runtime(root, "r", str(tmp_path / "c.sqlite"), 4), cells.values())
    own, swapped = instance_values(root, cells[False]), instance_values(root, cells[True])
    assert len(own) == 16 and own == swapped


# --- the gains beside the headline ---------------------------------------------------------------------------------

def test_gains_are_paired_over_users_and_an_agent_without_history_says_its_gains_are_0_by_construction(tmp_path):
    from perseval.report.analyses.gains import controls
    from perseval.report.words import NO_HISTORY_NOTE, NOT_INTERPRETABLE
    from perseval.report.sink.track import cell_metrics
    from tests.record_helpers import cell as record_cell

    exp = {"name": "t", "seed": 5, "shard_size": 4, "backbones": ["smollm2-135m"], "retrievers": [],
           "judges": ["smollm2-judge"], "controls": [SWAPPED_HISTORY],
           "benchmarks": [{"name": "iba", "sample": 6, "agents": ["iba-oracle"],
                           "params": {"noise_per_evidence": 2, "scenarios": ["Food ordering"]}},
                          {"name": "apeb", "sample": 4, "agents": ["apeb-blind", "apeb-random"]}]}
    plan = make_plan(load_experiment(_tree(tmp_path, exp, {"apeb-blind": {"kind": "test.apeb-history-blind"}})))
    root = str(tmp_path / "runs")
    rt = Runtime(root, "r", str(tmp_path / "c.sqlite"), 4)
    _compute(plan, root, rt, [c for c in plan.cells if c.judge != "smollm2-judge"])
    plan.cells = [c for c in plan.cells if c.judge != "smollm2-judge"]  # the LLM-judged cells were not run
    every = {c.key for c in plan.cells}
    fields = controls(plan, root, lambda c: c.agent, every)
    by_name = {c.name: fields.get(c.key) for c in plan.cells if c.run.control is None}
    oracle = by_name["iba/iba-oracle/-/-/iba.slots"].personalization
    swapped = [c for c in plan.cells if c.agent == "iba-oracle" and c.run.control][0]
    wrong = instance_values(root, swapped)
    assert oracle.reference == swapped.key and oracle.reference_score == pytest.approx(sum(wrong.values()) / len(wrong))
    assert oracle.point == pytest.approx(100.0 - oracle.reference_score)
    assert oracle.low > 0 and oracle.users == 6
    # own and swapped on the same instances: their difference is the gain, users dropping out or not
    assert oracle.own - oracle.reference_score == pytest.approx(oracle.point)
    # every gain's p, Holm-adjusted together
    from statsmodels.stats.multitest import multipletests
    gains = [g for f in fields.values() for g in (f.personalization, f.history) if g is not None and g.p is not None]
    assert [g.p_holm for g in gains] == pytest.approx(list(multipletests([g.p for g in gains], method="holm")[1]))
    blind = by_name["apeb/apeb-blind/-/-/apeb.ranking"].personalization
    assert blind.point == 0.0 and blind.low <= 0.0 <= blind.high
    assert blind.instances == 16 and blind.users == 4
    random = by_name["apeb/apeb-random/-/-/apeb.ranking"]
    assert random.note == NO_HISTORY_NOTE and random.zero_by_construction and random.personalization is None
    shown = record_cell("iba", "iba-oracle", "iba.slots", 1.0).model_copy(
        update={"controls": by_name["iba/iba-oracle/-/-/iba.slots"]})
    assert shown.estimate.point == 1.0  # the score itself never moves
    assert cell_metrics(shown)["controls.personalization_gain"] == pytest.approx(oracle.point)
    by_metric = {m.metric: m for m in by_name["iba/iba-oracle/-/-/iba.slots"].by_metric}
    assert by_metric["score"].point == pytest.approx(oracle.point)
    assert all(m.point == 0.0 for m in by_name["apeb/apeb-blind/-/-/apeb.ranking"].by_metric)  # hit@1, hit@5, mrr
    # a cell whose judge does not discriminate gets no gain at all, and leaves the Holm family
    oracle_key = next(c.key for c in plan.cells if c.name == "iba/iba-oracle/-/-/iba.slots")
    withheld = controls(plan, root, lambda c: c.agent, every - {oracle_key})
    assert withheld[oracle_key].note == NOT_INTERPRETABLE and withheld[oracle_key].personalization is None
    left = [g for f in withheld.values() for g in (f.personalization, f.history) if g is not None and g.p is not None]
    assert len(left) == len(gains) - 1


def test_the_no_history_reference_is_the_same_kind_without_history_else_the_named_one():
    from perseval.report.analyses.gains import no_history_agent

    exp = load_experiment(CONFIGS / "experiments" / "quickstart.yaml")
    assert no_history_agent(exp, 0, "iba-rag") == "iba-no-history"
    assert no_history_agent(exp, 1, "bespoke-raw-history") == "bespoke-no-context"
    assert no_history_agent(exp, 2, "apeb-direct") == "apeb-no-history"
    exp2 = load_experiment(experiment_file("iba_cpu"))
    assert no_history_agent(exp2, 0, "iba-agent") == "iba-no-history"  # another kind: by its name
