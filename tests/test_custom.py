"""Your own data (`custom`): the generic layout's loader and its errors, `sample:`, the request format, the
three reused judges on crafted outputs, the generic agent on every instance type, stats, and the plan of
configs/experiments/custom_example.yaml. The example is tests/data/custom_example (hand-written)."""
from __future__ import annotations

import asyncio
import json
from dataclasses import asdict
from pathlib import Path
from typing import Any, Callable

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from perseval.agents.base import AgentContext
from perseval.agents.rag import RagAgent
from perseval.benchmarks.base import AnalysisInputs
from perseval.benchmarks.custom.answers import API, RANKING, TEXT, TYPE_NAMES, CustomFormat, action_type
from perseval.benchmarks.custom.benchmark import CustomBenchmark, load_custom
from perseval.benchmarks.custom.judges import CustomCheckpointJudge, CustomRankingJudge, CustomSlotJudge
from perseval.benchmarks.actions import ActionFormat
from perseval.benchmarks.rankings import RankingFormat
from perseval.experiment.components import make_judges
from perseval.experiment.load import judge_specs, load_experiment
from perseval.core.errors import InputError
from perseval.judges.base import JudgeBinding
from perseval.pipeline.plan import make_plan
from perseval.core.instances import AgentOutput, Instance
from tests.scripted import ScriptedChat

from .conftest import CONFIGS, REPO

EXAMPLE = REPO / "tests" / "data" / "custom_example"


def rows(stem: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (EXAMPLE / f"{stem}.jsonl").read_text().splitlines() if line.strip()]


def write(folder: Path, instances: list[dict], histories: list[dict]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for stem, table in (("instances", instances), ("histories", histories)):
        (folder / f"{stem}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in table))
    return folder


def by_id(data) -> dict[str, Instance]:
    return {i.instance_id: i for i in data.instances}


# --- the layout, read --------------------------------------------------------------------------------------


def test_the_example_loads_as_three_instance_types_in_the_judges_shapes():
    data = load_custom(EXAMPLE)
    got = by_id(data)
    assert list(got) == [r["instance_id"] for r in rows("instances")]  # file order
    assert {i: action_type(x) for i, x in got.items()} == {
        "mira-invite": TEXT, "mira-order": API, "jonas-lights": RANKING, "jonas-ride": TEXT,
        "sade-hotel": API, "sade-book": RANKING}
    invite, order, lights = got["mira-invite"], got["mira-order"], got["jonas-lights"]
    assert invite.benchmark == "custom" and invite.group == "writing" and invite.user_id == "mira"
    assert [c["id"] for c in invite.gold["checkpoints"]] == ["menu", "length"]
    assert invite.gold["checkpoints"][0]["statement"].startswith("The message describes the dinner")
    assert order.payload["api"]["task_fixed"] == {"restaurant": "Saffron House", "delivery_time": "12:00"}
    assert order.gold["slots"] == {"diet": "vegetarian", "spice_level": "hot"}
    assert lights.gold == {"purchased": "b2"} and [c["id"] for c in lights.payload["candidates"]][:2] == ["b1", "b2"]
    # a candidate without brand or attributes is still a full card for the ranking prompt
    assert lights.payload["candidates"][2] == {"id": "b3", "title": "Clip-on LED light", "brand": "", "price": 6.99,
                                               "attributes": []}
    # evidence counted from the history's tags; histories in time order, turns as User/Assistant text
    assert invite.payload["n_evidence"] == 3 and got["jonas-ride"].payload["n_evidence"] == 4
    mira = [d for d in data.documents if d.owner == "mira"]
    assert [d.doc_id for d in mira] == [f"mira-0{n}" for n in range(1, 8)]
    assert mira[1].text.startswith("User: The curry you suggested had chicken") and "\nAssistant: Sorry" in mira[1].text
    assert mira[1].meta["dimension"] == "diet" and mira[1].meta["kind"] == "correction" and mira[0].meta == {"kind": "noise"}
    assert data.info["by_type"] == {"free text": 2, "API call": 2, "ranking": 2} and data.info["n_evidence"] == 10


def to_parquet(folder: Path, json_text: bool) -> Path:
    """The example as Parquet: nested fields as native list/struct columns, or as JSON text."""
    folder.mkdir()
    for stem in ("instances", "histories"):
        table = rows(stem)
        names = list(dict.fromkeys(k for r in table for k in r))
        if json_text:
            table = [{k: json.dumps(v) if isinstance(v, (dict, list)) else v for k, v in r.items()} for r in table]
            pq.write_table(pa.table({n: [r.get(n) for r in table] for n in names}), folder / f"{stem}.parquet")
        else:
            pq.write_table(pa.Table.from_pylist([{n: r.get(n) for n in names} for r in table]),
                           folder / f"{stem}.parquet")
    return folder


@pytest.mark.parametrize("json_text", [False, True], ids=["native-columns", "json-text-columns"])
def test_parquet_gives_the_same_data_as_json_lines(tmp_path, json_text):
    want, got = load_custom(EXAMPLE), load_custom(to_parquet(tmp_path / "pq", json_text))
    assert [asdict(i) for i in got.instances] == [asdict(i) for i in want.instances]
    assert [asdict(d) for d in got.documents] == [asdict(d) for d in want.documents]


# --- broken rows: each names file, row and field ---------------------------------------------------------------

Edit = Callable[[list[dict], list[dict]], None]


def _set(index: int, **fields: Any) -> Edit:
    def edit(inst: list[dict], hist: list[dict]) -> None:
        for k, v in fields.items():
            if v is None:
                inst[index].pop(k, None)
            else:
                inst[index][k] = v
    return edit


def _turn(index: int, **fields: Any) -> Edit:
    def edit(inst: list[dict], hist: list[dict]) -> None:
        hist[index].update(fields)
    return edit


def _candidates(index: int, change: Callable[[list[dict]], None]) -> Edit:
    def edit(inst: list[dict], hist: list[dict]) -> None:
        change(inst[index]["candidates"])
    return edit


CANDIDATES_1 = [{"id": "k1", "title": "One book", "price": 3}]
BROKEN: dict[str, tuple[Edit, str, int, str, str]] = {
    # case: (edit, file, 1-based row, field, what the message says)
    "duplicate instance id": (_set(3, instance_id="mira-invite"), "instances.jsonl", 4, "instance_id",
                              "duplicate instance_id 'mira-invite' (first at row 1)"),
    "unknown user": (_set(1, user_id="nobody"), "instances.jsonl", 2, "user_id", "user 'nobody' has no turns"),
    "gold item outside the candidates": (_set(2, gold_candidate="b9"), "instances.jsonl", 3, "gold_candidate",
                                         "'b9' is not among the instance's candidates ['b1', 'b2'"),
    "ranking without a gold item": (_set(5, gold_candidate=None), "instances.jsonl", 6, "gold_candidate",
                                    "missing; expected a string"),
    "duplicate candidate id": (_candidates(2, lambda cs: cs[4].update(id="b1")), "instances.jsonl", 3,
                               "candidates[4].id", "duplicate candidate id 'b1' (first at candidates[0])"),
    "candidate without price": (_candidates(5, lambda cs: cs[1].pop("price")), "instances.jsonl", 6,
                                "candidates[1].price", "missing; expected a number of 0 or more"),
    "negative price": (_candidates(5, lambda cs: cs[0].update(price=-2)), "instances.jsonl", 6, "candidates[0].price",
                       "-2 is not a number of 0 or more"),
    "candidate field outside the layout": (_candidates(2, lambda cs: cs[0].update(rating=4.5)), "instances.jsonl",
                                           3, "candidates[0].rating", "unknown field"),
    "one candidate": (_set(5, candidates=CANDIDATES_1, gold_candidate="k1"), "instances.jsonl", 6, "candidates",
                      "1 candidate; a ranking needs at least 2"),
    "misspelt field": (_set(1, gold_slot={"diet": "vegan"}), "instances.jsonl", 2, "gold_slot", "unknown field"),
    "nothing scored": (_set(0, checkpoints=None), "instances.jsonl", 1, "checkpoints", "the row scores nothing"),
    "two instance types": (_set(0, candidates=CANDIDATES_1), "instances.jsonl", 1, "candidates",
                           "a row is one instance type: it has both `checkpoints` (free text) and `candidates`"),
    "api without gold slots": (_set(4, gold_slots=None), "instances.jsonl", 5, "gold_slots", "missing"),
    "gold slots without api": (_set(4, api=None), "instances.jsonl", 5, "api", "missing; expected an object"),
    "gold slot not in the api": (_set(1, gold_slots={"spice": "hot"}), "instances.jsonl", 2, "gold_slots.spice",
                                 "names no slot of the API"),
    "gold slot fixed by the task": (_set(1, gold_slots={"restaurant": "Saffron House"}), "instances.jsonl", 2,
                                    "gold_slots.restaurant", "is task-fixed"),
    "gold slot value not allowed": (_set(4, gold_slots={"floor": "top"}), "instances.jsonl", 5, "gold_slots.floor",
                                    "value 'top' is not among the slot's values ['low', 'high']"),
    "checkpoint without statement": (_set(3, checkpoints=[{"id": "x"}]), "instances.jsonl", 4,
                                     "checkpoints[0].statement", "missing"),
    "no group": (_set(0, group=None), "instances.jsonl", 1, "group", "missing; expected a string"),
    "empty query": (_set(2, query=""), "instances.jsonl", 3, "query", "missing"),
    "bad timestamp": (_turn(9, timestamp="18/01/2025"), "histories.jsonl", 10, "timestamp",
                      "'18/01/2025' is not an ISO 8601 date-time"),
    "duplicate turn id": (_turn(8, turn_id="jonas-01"), "histories.jsonl", 9, "turn_id",
                          "duplicate turn_id 'jonas-01' (first at row 8)"),
    "turn field outside the layout": (_turn(0, mood="happy"), "histories.jsonl", 1, "mood", "unknown field"),
    "evidence kind outside Table 12": (_turn(1, evidence=[{"dimension": "diet", "value": "vegetarian",
                                                           "kind": "hint"}]),
                                       "histories.jsonl", 2, "evidence[0].kind", "unknown value 'hint'"),
    "turn with text and user": (_turn(3, text="User: hi"), "histories.jsonl", 4, "text", "not both"),
}


@pytest.mark.parametrize("case", list(BROKEN))
def test_a_broken_row_names_file_row_and_field(tmp_path, case):
    edit, file, row, field, says = BROKEN[case]
    inst, hist = rows("instances"), rows("histories")
    edit(inst, hist)
    folder = write(tmp_path / "d", inst, hist)
    with pytest.raises(InputError) as err:
        load_custom(folder)
    e = err.value
    assert (Path(e.path).name, e.row, e.field) == (file, row, field), str(e)
    assert says in e.detail, str(e)
    assert str(e).startswith(f"{folder / file}, row {row}, field '{field}': ")


def test_a_parquet_row_is_named_by_its_index_plus_one(tmp_path):
    folder = to_parquet(tmp_path / "pq", json_text=False)
    table = pq.read_table(folder / "instances.parquet")
    gold = table.column("gold_candidate").to_pylist()
    gold[5] = "k404"
    pq.write_table(table.set_column(table.schema.get_field_index("gold_candidate"), "gold_candidate",
                                    pa.array(gold)), folder / "instances.parquet")
    with pytest.raises(InputError, match=r"instances.parquet, row 6, field 'gold_candidate': 'k404' is not among"):
        load_custom(folder)


def test_folder_level_problems_point_at_the_layout(tmp_path):
    with pytest.raises(InputError, match="not a folder.*docs/custom-data-layout.md"):
        load_custom(tmp_path / "missing")
    folder = write(tmp_path / "d", rows("instances"), rows("histories"))
    (folder / "histories.jsonl").unlink()
    with pytest.raises(InputError, match=r"missing file histories.jsonl \(or histories.parquet\). see "
                                         r"docs/custom-data-layout.md"):
        load_custom(folder)
    folder = to_parquet(tmp_path / "both", json_text=False)
    write(folder, rows("instances"), rows("histories"))
    with pytest.raises(InputError, match="both instances.jsonl and instances.parquet exist"):
        load_custom(folder)
    for stem in ("instances", "histories"):
        (folder / f"{stem}.parquet").unlink()
    (folder / "instances.jsonl").write_text('{"instance_id": "a"\n')
    with pytest.raises(InputError, match=r"instances.jsonl, row 1: not valid JSON"):
        load_custom(folder)
    with pytest.raises(InputError, match="needs `source:`"):
        CustomBenchmark().build(sample=4, seed=0, source=None)


# --- sample: ------------------------------------------------------------------------------------------------


def ids(data) -> list[str]:
    return [i.instance_id for i in data.instances]


def test_sample_is_seeded_in_file_order_and_a_larger_one_extends_it():
    every = ids(load_custom(EXAMPLE))
    build = lambda n, seed: CustomBenchmark().build(sample=n, seed=seed, source=EXAMPLE)  # noqa: E731
    three = build(3, 5)
    assert len(three.instances) == 3 and ids(three) == sorted(ids(three), key=every.index)
    assert ids(build(3, 5)) == ids(three)
    assert set(ids(three)) < set(ids(build(4, 5)))
    assert len({tuple(ids(build(3, s))) for s in range(8)}) > 1
    assert ids(build(50, 5)) == every
    assert {d.owner for d in three.documents} == {i.user_id for i in three.instances}
    assert three.info["n_instances"] == 3 and three.info["n_instances_in_release"] == 6 and three.info["seed"] == 5


# --- the request format ---------------------------------------------------------------------------------------------


def test_the_request_format_is_ibas_for_text_and_api_calls_and_apebs_for_rankings():
    got, task = by_id(load_custom(EXAMPLE)), CustomFormat()
    for iid, own in (("mira-invite", ActionFormat()), ("sade-hotel", ActionFormat()), ("jonas-lights", RankingFormat())):
        assert asdict(task.prompt(got[iid], [], 300)) == asdict(own.prompt(got[iid], [], 300)), iid
    assert task.prompt(got["mira-invite"], [], 300).json_schema is None
    hotel = task.prompt(got["sade-hotel"], [], 300).json_schema
    assert set(hotel["properties"]) == {"floor", "room_location", "bed"}  # task-fixed slots are not asked
    ranking = task.prompt(got["jonas-lights"], [], 300)
    assert ranking.json_schema["properties"]["ranking"]["items"]["enum"] == ["b1", "b2", "b3", "b4", "b5", "b6"]
    assert "Lumora Trail 400 light set" in ranking.messages[-1]["content"]
    assert task.extract(got["jonas-lights"], '{"ranking": ["b2", "b6", "b3", "b5", "b1"]}').parsed == \
        {"ranking": ["b2", "b6", "b3", "b5", "b1"]}
    assert task.extract(got["jonas-lights"], '{"ranking": ["b2", "b6"]}').problem == "2 usable candidate ids, 5 needed"
    assert task.extract(got["sade-hotel"], '{"floor": "High", "bed": "double"}').parsed == \
        {"hotel": "Hotel Ardent, Lisbon", "dates": "12-14 May", "floor": "high", "bed": "double"}
    assert task.extract(got["mira-invite"], "  ").problem == "empty answer"


# --- the judges, on crafted outputs ----------------------------------------------------------------------------------


def output(inst: Instance, text: str, status: str = "ok") -> AgentOutput:
    answer = CustomFormat().extract(inst, text)
    return AgentOutput(inst.instance_id, "a", 0, text, parsed=answer.parsed, status=status)  # type: ignore[arg-type]


def judged(judge, inst: Instance, out: AgentOutput, model=None):
    judgments = asyncio.run(judge.judge(inst, out, JudgeBinding(judge.kind, model)))
    return judgments, {s.metric: s for s in judge.score(inst, out, judgments)}


def test_each_judge_applies_to_its_own_instance_type_only():
    data = load_custom(EXAMPLE)
    judges = {CustomCheckpointJudge(): TEXT, CustomSlotJudge(): API, CustomRankingJudge(): RANKING}
    for inst in data.instances:
        assert [kind for j, kind in judges.items() if j.applies(inst)] == [action_type(inst)], inst.instance_id
    assert {j.kind: j.benchmark for j in judges} == {"custom.checkpoint": "custom", "custom.slots": "custom",
                                                     "custom.ranking": "custom"}


def test_the_slot_rule_scores_each_gold_slot_of_a_real_answer():
    hotel = by_id(load_custom(EXAMPLE))["sade-hotel"]
    js, scores = judged(CustomSlotJudge(), hotel, output(hotel, '{"floor": "HIGH", "room_location": "street side"}'))
    assert {j.item_id: j.score for j in js} == {"floor": 1.0, "room_location": 0.0}
    assert scores["score"].value == 50.0 and scores["score"].n_items == 2 and scores["score"].group == "travel"
    _, missing = judged(CustomSlotJudge(), hotel, output(hotel, '{"bed": "twin"}'))
    assert missing["score"].value == 0.0
    _, invalid = judged(CustomSlotJudge(), hotel, output(hotel, "a room please", status="invalid"))
    assert invalid["score"].value == 0.0 and invalid["score"].n_unscored == 0  # the agent's miss, not the judge's


def test_the_ranking_rule_scores_hits_and_reciprocal_rank_of_the_gold_candidate():
    lights = by_id(load_custom(EXAMPLE))["jonas-lights"]
    js, scores = judged(CustomRankingJudge(), lights, output(lights, '{"ranking": ["b6", "b2", "b3", "b5", "b1"]}'))
    assert (scores["hit@1"].value, scores["hit@5"].value, scores["mrr"].value) == (0.0, 100.0, 50.0)
    assert js[0].feedback == "purchase at rank 2"
    _, first = judged(CustomRankingJudge(), lights, output(lights, '{"ranking": ["b2", "b6", "b3", "b5", "b1"]}'))
    assert first["hit@1"].value == 100.0 and first["mrr"].value == 100.0
    _, short = judged(CustomRankingJudge(), lights, output(lights, '{"ranking": ["b2"]}', status="invalid"))
    assert short["hit@1"].value == 0.0 and short["hit@5"].value == 0.0  # an unusable ranking is a scored miss


def test_the_checkpoint_judge_asks_once_per_checkpoint_and_keeps_unreadable_answers_unscored():
    invite = by_id(load_custom(EXAMPLE))["mira-invite"]
    met = {"menu": True, "length": False}

    def verdict(messages: list[dict[str, Any]]) -> str:
        which = "menu" if "meat-free" in messages[-1]["content"] else "length"
        return json.dumps({"verdict": met[which], "reason": which})

    model = ScriptedChat(verdict)
    out = output(invite, "Dear all, come for a vegetarian curry on Friday at seven! It will be a long evening.")
    js, scores = judged(CustomCheckpointJudge(), invite, out, model)
    assert len(model.calls) == 2 and {j.item_id: j.score for j in js} == {"menu": 1.0, "length": 0.0}
    assert out.text in model.calls[0]["messages"][-1]["content"]
    assert scores["score"].value == 50.0 and scores["score"].n_items == 2
    js, scores = judged(CustomCheckpointJudge(), invite, out, ScriptedChat(["I cannot tell", '{"verdict": true, "reason": "ok"}']))
    assert sorted(j.status for j in js) == ["scored", "unscored"]
    assert scores["score"].value == 100.0 and scores["score"].n_unscored == 1  # the unreadable one is left out, not 0
    _, none = judged(CustomCheckpointJudge(), invite, out, ScriptedChat("I cannot say without more context"))
    assert none["score"].value is None and none["score"].n_unscored == 2


# --- the generic agent on every instance type, judged ------------------------------------------------------------


def perfect_answer(inst: Instance) -> str:
    """What a model that knew the user would answer, in the format the prompt asks for."""
    if action_type(inst) == API:
        return json.dumps(inst.gold["slots"])
    if action_type(inst) == RANKING:
        ids_ = [c["id"] for c in inst.payload["candidates"]]
        gold = inst.gold["purchased"]
        return json.dumps({"ranking": [gold, *[i for i in ids_ if i != gold]][:5]})
    return "A short vegetarian plan in bullet points."


def test_the_no_history_agent_answers_each_type_and_the_judges_score_it():
    data = load_custom(EXAMPLE)
    gold = by_id(data)
    agent = RagAgent({"top_k": 0})
    assert agent.requires() == {"llm", "request_format"}
    backbone = ScriptedChat(lambda messages: next(perfect_answer(i) for i in data.instances
                                                  if i.query in messages[-1]["content"]))
    ctx = AgentContext(llm=backbone, request_format=CustomBenchmark.request_format)
    for inst in data.instances:
        out = asyncio.run(agent.act(inst.public(), ctx, 0, "no-history"))
        assert out.status == "ok", (inst.instance_id, out.error)
        if action_type(inst) == TEXT:
            continue
        judge = CustomSlotJudge() if action_type(inst) == API else CustomRankingJudge()
        _, scores = judged(judge, gold[inst.instance_id], out)
        assert scores[judge.metrics[0]].value == 100.0, inst.instance_id
    # the four structured answers were asked under a JSON schema, the two free-text ones without
    assert [c["json_schema"] is not None for c in backbone.calls] == \
        [action_type(i) != TEXT for i in data.instances]


# --- stats -------------------------------------------------------------------------------------------------------


def test_stats_count_types_groups_items_and_histories():
    data = load_custom(EXAMPLE)
    tables = CustomBenchmark().stats(data.instances, data.documents)
    types = tables["instances_by_type"]
    assert list(types.index) == ["free text", "API call", "ranking"] and list(types["instances"]) == [2, 2, 2]
    assert list(types["items_max"]) == [2, 2, 6] and types.loc["ranking", "items_mean"] == 5.5
    groups = tables["instances_by_group"]
    assert groups.loc["shopping", "instances"] == 2 and groups.loc["shopping", "ranking"] == 2
    assert groups.loc["shopping", "history_turns"] == 13 and groups.loc["planning", "evidence_turns"] == 4
    hist = tables["histories"].loc["all"]
    assert (hist["users"], hist["turns"], hist["evidence_turns"], hist["turns_per_user_min"]) == (3, 20, 10, 6)


# --- the plan of the shipped example ------------------------------------------------------------------------------


def test_the_example_plan_has_one_cell_per_agent_and_judge_that_applies():
    exp = load_experiment(CONFIGS / "experiments" / "custom_example.yaml")
    entry = exp.experiment.benchmarks[0]
    data = CustomBenchmark().build(sample=entry.sample, seed=exp.experiment.seed, source=REPO / entry.source)
    specs = judge_specs(exp, 0)
    applying = [s.name for s in specs if any(j.applies(i) for j in make_judges(s) for i in data.instances)]
    assert applying == ["smollm2-judge", "custom.slots", "custom.ranking"]
    plan = make_plan(exp)
    assert sorted((c.agent, c.judge) for c in plan.cells) == sorted(
        (a, j) for a in entry.agents for j in applying)
    retrievers = {c.agent: c.retriever for c in plan.cells}
    assert retrievers == {"rag": "minilm", "no-history": "-"}
    assert {c.judged.judge.kinds for c in plan.cells} == {("custom.checkpoint",), ("custom.slots",),
                                                           ("custom.ranking",)}
    assert len({c.key for c in plan.cells}) == len(plan.cells) == 6
    assert "custom/no-history/smollm2-135m/-/custom.ranking" in {c.name for c in plan.cells}


def test_a_judge_yaml_without_kind_binds_its_model_to_the_custom_checkpoint_judge():
    exp = load_experiment(CONFIGS / "experiments" / "custom_example.yaml")
    llm = [s for s in judge_specs(exp, 0) if s.uses_llm]
    assert [(s.name, s.kinds, s.model.name) for s in llm] == [("smollm2-judge", ("custom.checkpoint",), "smollm2-135m")]
    assert llm[0].params_json() == {"custom.checkpoint": {"max_tokens": None}}


def test_the_analysis_splits_each_cell_by_type_and_group_and_logs_the_dataset_tables():
    data = load_custom(EXAMPLE)
    bench = CustomBenchmark()
    rows = []
    for k, inst in enumerate(data.instances):
        value = None if k == 0 else float(k % 2)  # the first instance unscored: left out of the mean, counted
        rows.append({"cell": "c", "agent": "rag", "agent_kind": "rag", "agent_params": "{}", "backbone": "m",
                     "retriever": "minilm", "judge": "j", "judge_model": "m", "instance_id": inst.instance_id,
                     "repeat": 0, "judge_repeat": 0, "group": inst.group, "metric": "score", "value": value,
                     "n_items": 2, "n_unscored": int(value is None)})
    scores = pd.DataFrame(rows)
    out = bench.analyze_run(AnalysisInputs(scores, data.instances, pd.DataFrame, pd.DataFrame,
                                           lambda: data.documents))
    assert {"scores_by_type_and_group", "instances_by_group", "instances_by_type", "histories"} == set(out)
    table = out["scores_by_type_and_group"]
    assert table["instances"].sum() == len(data.instances) and table["unscored_items"].sum() == 1
    assert table["scored"].sum() == len(data.instances) - 1
    first = data.instances[0]
    row = table[(table["group"] == first.group) & (table["type"] == TYPE_NAMES[action_type(first)])].iloc[0]
    same = [k for k, i in enumerate(data.instances) if (i.group, action_type(i)) == (first.group, action_type(first))]
    expected = [float(k % 2) for k in same if k != 0]
    assert row["scored"] == len(expected) and (row["mean"] == sum(expected) / len(expected) if expected
                                               else pd.isna(row["mean"]))
