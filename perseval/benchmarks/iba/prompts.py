"""The request of IBA-Bench's LLM slot judge (iba.slot_llm), written for perseval; the texts are the card's
(perseval.benchmarks.iba.card). The generic agents' request and the checkpoint judge's, which a user's own data
shares, are perseval.benchmarks.actions and perseval.benchmarks.action_judges.
"""
from __future__ import annotations

from perseval.benchmarks.iba.card import OPTIONS_TEMPLATE, SLOT_JUDGE_INSTRUCTION, SLOT_JUDGE_TEMPLATE
from perseval.judges.quoting import data_rule, quote

_SLOT_JUDGE_SYSTEM = SLOT_JUDGE_INSTRUCTION + " " + data_rule("value") + " Reply with JSON only."


def slot_judge_messages(task: str, api_name: str, slot: str, allowed: list[str], submitted: str,
                        preference: str) -> list[dict[str, str]]:
    """One binary CallAPI slot judgment (IBA-Bench C.2): is the submitted value of `slot` valid and consistent
    with the task and the user's preference? The value is quoted as data; the verdict first, then the reason."""
    options = OPTIONS_TEMPLATE.format(values=", ".join(allowed)) if allowed else ""
    user = SLOT_JUDGE_TEMPLATE.format(task=task, api=api_name, slot=slot, options=options,
                                      value=quote("value", submitted), preference=preference)
    return [{"role": "system", "content": _SLOT_JUDGE_SYSTEM}, {"role": "user", "content": user}]
