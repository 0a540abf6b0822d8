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

from typing import Any

from perseval.benchmarks.iba.taxonomy import Scenario, load_taxonomy
from perseval.core.records import Instance

QA_ACTION = "qa"
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


def asked_dimensions(instance: Instance) -> list[str]:
    """Constrained dimension ids in gold order (gold preferences, else checkpoints, else slots)."""
    prefs = instance.gold.get("preferences") or []
    if prefs:
        return [p["dimension"] for p in prefs]
    if instance.gold.get("checkpoints"):
        return [c.get("dimension", c["id"]) for c in instance.gold["checkpoints"]]
    slots = slot_dimensions(known_scenario(instance.payload.get("scenario")))
    return [slots.get(name, name) for name in instance.gold.get("slots", {})]


def qa_query(instance: Instance, scenario: Scenario | None) -> str:
    names = [dimension_name(scenario, d) for d in asked_dimensions(instance)]
    aspects = "\n".join(f"- {n}" for n in names)
    where = instance.payload.get("scenario", "this kind of task")
    return (f"A question about my preferences ({where}); do not carry out the task.\n"
            f"The task I have in mind: {instance.query}\n"
            f"From what you know about me, what do I currently prefer for each of these aspects?\n{aspects}\n"
            "Answer with one line per aspect.")


def _is_dynamic(instance: Instance, dim_id: str) -> bool:
    return any(p.get("dimension") == dim_id and p.get("dynamic") for p in instance.gold.get("preferences") or [])


def _qa_statement(instance: Instance, dim_name: str, dim_id: str, wants: str) -> str:
    when = "now " if _is_dynamic(instance, dim_id) else ""
    return f'The answer says that, for "{dim_name}", the user {when}wants this: {wants}'


def checkpoints_from_checkpoints(instance: Instance, scenario: Scenario | None) -> list[dict[str, Any]]:
    """Generate(text): the original checkpoints, their statements turned into claims about the answer."""
    out = []
    for cp in instance.gold.get("checkpoints", []):
        dim_id = cp.get("dimension", cp["id"])
        wants = value_label(scenario, dim_id, cp.get("value", "")) or cp["statement"]
        statement = _qa_statement(instance, dimension_name(scenario, dim_id), dim_id, wants)
        out.append({**cp, "statement": statement, "task_statement": cp["statement"]})
    return out


def checkpoints_from_slots(instance: Instance, scenario: Scenario | None) -> list[dict[str, Any]]:
    """CallAPI(params): one checkpoint per personalization slot: the user prefers <value> for <slot>."""
    dims = slot_dimensions(scenario)
    out = []
    for slot, value in instance.gold.get("slots", {}).items():
        dim_id = dims.get(slot, slot)
        label = value_label(scenario, dim_id, str(value))
        when = "now " if _is_dynamic(instance, dim_id) else ""
        gloss = f"{dimension_name(scenario, dim_id)}" + (f": {label[0].lower()}{label[1:]}" if label else "")
        statement = f"The answer says that the user {when}prefers '{value}' for {slot} ({gloss.rstrip('.')})."
        out.append({"id": slot, "dimension": dim_id, "value": value, "statement": statement})
    return out


def make_qa_probe(instance: Instance) -> Instance:
    """The QA twin of one task instance: same user, group and gold preferences; id + '-qa'."""
    scenario = known_scenario(instance.payload.get("scenario"))
    from_slots = instance.payload.get("action_type") == "call_api" or not instance.gold.get("checkpoints")
    checkpoints = (checkpoints_from_slots if from_slots else checkpoints_from_checkpoints)(instance, scenario)
    payload = {"scenario": instance.payload.get("scenario"), "action_type": QA_ACTION,
               "base_instance": instance.instance_id, "base_action_type": instance.payload.get("action_type"),
               "n_evidence": instance.payload.get("n_evidence"),
               "n_constraints": instance.payload.get("n_constraints")}
    if "dynamic" in instance.payload:
        payload["dynamic"] = instance.payload["dynamic"]
    gold = {"checkpoints": checkpoints, "preferences": [dict(p) for p in instance.gold.get("preferences", [])]}
    if "n_dynamic" in instance.gold:
        gold["n_dynamic"] = instance.gold["n_dynamic"]  # static vs dynamic slicing of the twins
    return Instance(instance.instance_id + QA_SUFFIX, instance.benchmark, instance.user_id, instance.group,
                    qa_query(instance, scenario), payload, gold)


def make_qa_probes(instances: list[Instance]) -> list[Instance]:
    """One QA twin per task instance, in input order; instances that are QA probes already are skipped."""
    return [make_qa_probe(i) for i in instances if i.payload.get("action_type") != QA_ACTION]
