"""QA probe twins of IBA-Bench instances, for the knowledge-to-action gap (paper 5.3, Figure 5(d)).

A twin asks the agent to *state* the user's preference for each constrained dimension of a task
instead of carrying the task out; the same user and history stand behind both, so the QA score
minus the task score on the same base instances measures knowing vs acting. Deterministic, no LLM.

The twin's checkpoints keep the original ids, dimensions and values, but their statements are
rewritten as claims about the answer ("the answer says the user wants ..."): the original
statements describe a task output ("the response is written in the first person plural") that a
QA answer cannot meet literally. The original statement is kept under `task_statement`.
"""
from __future__ import annotations

from typing import Any, Iterable

from perseval.benchmarks.iba.taxonomy import Scenario, load_taxonomy
from perseval.benchmarks.iba.views import IbaGold, IbaPayload
from perseval.core.instances import Instance

QA_ACTION = "qa"
QA_METRIC = "qa_score"  # a QA twin's metric, so a cell's `score` is task execution only
QA_SUFFIX = "-qa"


def known_scenario(name: Any) -> Scenario | None:
    """The taxonomy's scenario of that name, or None for a scenario only a release knows."""
    try:
        return load_taxonomy().scenario(str(name))
    except KeyError:
        return None  # an instance from another taxonomy: fall back to ids


def _humanize(dim_id: str) -> str:
    return dim_id.replace("_", " ").strip().capitalize()


def dimension_name(scenario: Scenario | None, dim_id: str) -> str:
    """The readable dimension name of the taxonomy, else the id made readable."""
    try:
        return scenario.dimension(dim_id).name if scenario else _humanize(dim_id)
    except KeyError:
        return _humanize(dim_id)


def value_label(scenario: Scenario | None, dim_id: str, value: str) -> str | None:
    try:
        return scenario.dimension(dim_id).value(value).label if scenario else None
    except KeyError:
        return None


def slot_dimensions(scenario: Scenario | None) -> dict[str, str]:
    """Personal slot name -> its dimension id (empty without an API template)."""
    if scenario is None or scenario.api is None:
        return {}
    return {s.name: str(s.dimension) for s in scenario.api.personal_slots}


def task_instances(instances: Iterable[Instance]) -> list[Instance]:
    """The task instances, QA twins left out."""
    return [i for i in instances if IbaPayload.of(i).action_type != QA_ACTION]


def asked_dimensions(payload: IbaPayload, gold: IbaGold) -> list[str]:
    """Constrained dimension ids in gold order (gold preferences, else checkpoints, else slots)."""
    if gold.preferences:
        return [p["dimension"] for p in gold.preferences]
    if gold.checkpoints:
        return [c.get("dimension", c["id"]) for c in gold.checkpoints]
    slots = slot_dimensions(known_scenario(payload.scenario))
    return [slots.get(name, name) for name in gold.slots]


def qa_query(instance: Instance, payload: IbaPayload, gold: IbaGold, scenario: Scenario | None) -> str:
    names = [dimension_name(scenario, d) for d in asked_dimensions(payload, gold)]
    aspects = "\n".join(f"- {n}" for n in names)
    where = payload.scenario or "this kind of task"
    return (f"A question about my preferences ({where}); do not carry out the task.\n"
            f"The task I have in mind: {instance.query}\n"
            f"From what you know about me, what do I currently prefer for each of these aspects?\n{aspects}\n"
            "Answer with one line per aspect.")


def _qa_statement(gold: IbaGold, dim_name: str, dim_id: str, wants: str) -> str:
    when = "now " if gold.shifted(dim_id) else ""
    return f'The answer says that, for "{dim_name}", the user {when}wants this: {wants}'


def checkpoints_from_checkpoints(gold: IbaGold, scenario: Scenario | None) -> list[dict[str, Any]]:
    """Generate(text): the original checkpoints, their statements turned into claims about the answer."""
    out = []
    for cp in gold.checkpoints:
        dim_id = cp.get("dimension", cp["id"])
        wants = value_label(scenario, dim_id, cp.get("value", "")) or cp["statement"]
        statement = _qa_statement(gold, dimension_name(scenario, dim_id), dim_id, wants)
        out.append({**cp, "statement": statement, "task_statement": cp["statement"]})
    return out


def checkpoints_from_slots(gold: IbaGold, scenario: Scenario | None) -> list[dict[str, Any]]:
    """CallAPI(params): one checkpoint per personalization slot: the user prefers <value> for <slot>."""
    dims = slot_dimensions(scenario)
    out = []
    for slot, value in gold.slots.items():
        dim_id = dims.get(slot, slot)
        label = value_label(scenario, dim_id, str(value))
        when = "now " if gold.shifted(dim_id) else ""
        gloss = f"{dimension_name(scenario, dim_id)}" + (f": {label[0].lower()}{label[1:]}" if label else "")
        statement = f"The answer says that the user {when}prefers '{value}' for {slot} ({gloss.rstrip('.')})."
        out.append({"id": slot, "dimension": dim_id, "value": value, "statement": statement})
    return out


def make_qa_probe(instance: Instance) -> Instance:
    """The QA twin of one task instance: same user, group and gold preferences; id + '-qa'."""
    view, gold = IbaPayload.of(instance), IbaGold.of(instance)
    scenario = known_scenario(view.scenario)
    from_slots = view.is_api_call or not gold.checkpoints
    checkpoints = (checkpoints_from_slots if from_slots else checkpoints_from_checkpoints)(gold, scenario)
    # a task without a scenario gives its twin None, as the twin was always written
    payload = {"scenario": view.scenario or None, "action_type": QA_ACTION,
               "base_instance": instance.instance_id, "base_action_type": view.action_type,
               "n_evidence": view.n_evidence, "n_constraints": view.n_constraints}
    if view.dynamic is not None:
        payload["dynamic"] = view.dynamic
    twin_gold = {"checkpoints": checkpoints, "preferences": [dict(p) for p in gold.preferences]}
    if gold.n_dynamic is not None:
        twin_gold["n_dynamic"] = gold.n_dynamic  # static vs dynamic slicing of the twins
    return Instance(instance.instance_id + QA_SUFFIX, instance.benchmark, instance.user_id, instance.group,
                    qa_query(instance, view, gold, scenario), payload, twin_gold)


def make_qa_probes(instances: list[Instance]) -> list[Instance]:
    """One QA twin per task instance, in input order; instances that are QA probes already are skipped."""
    return [make_qa_probe(i) for i in task_instances(instances)]
