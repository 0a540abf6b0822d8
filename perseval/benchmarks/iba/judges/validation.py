"""The IBA validation labeller (appendix B.1): an LLM judge's 0/1 label per instance and dimension.

The judge sees what a human annotator would: the persona, the intended
preferences (with their changes), the evidence turns in order with a few noise
turns around them, and the task. An answer without a usable 0/1 is stored as
None with its raw text and counted as unparsed; a failed request likewise as
failed. Neither becomes 0, so a weak judge lowers n, not agreement.
"""
from __future__ import annotations

import asyncio
from typing import Any, Mapping, Sequence

from perseval.benchmarks.iba.validation import DIMENSIONS, LabelSet
from perseval.llm.base import ChatModel
from perseval.judges.binary import REASON, binary_verdict
from perseval.judges.quoting import data_rule, quote
from perseval.core.instances import Document, Instance, instant
from perseval.benchmarks.iba.views import IbaGold
from perseval.benchmarks.views import ActionPayload
from perseval.benchmarks.views import ScenarioPayload

LABEL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"label": {"type": "integer", "enum": [0, 1]}, "reason": REASON},
    "required": ["label", "reason"],
}
# Written for perseval after the three criteria of appendix B.1.
CRITERIA = {
    "reasonableness": (
        "Could this history and this task really happen? Label 1 if they are believable under common sense "
        "and the scenario; label 0 if something is clearly impossible, invented or absurd."),
    "coherence": (
        "Do the history and the task fit together and hold together? Label 1 if they read as one consistent "
        "story; label 0 if they contradict each other or break off without sense."),
    "persona_consistency": (
        "Does the user behave like the persona described, and do the preference changes happen the way they are "
        "meant to (an older habit first, the new one later)? Label 1 if so; label 0 if the persona or the "
        "change over time is misrepresented."),
}
SYSTEM = ("You check the quality of benchmark data. Judge only the criterion asked. " + data_rule("instance")
          + " Reply with JSON only.")
MAX_VIEW_CHARS = 6000  # inside a small judge's context


def _preferences(inst: Instance) -> list[str]:
    out = []
    for p in IbaGold.of(inst).preferences:
        line = f"- {p['dimension']}: {p['value']}"
        out.append(line + (f" (changed from {p['previous']})" if p.get("previous") else ""))
    return out


def _history(docs: Sequence[Document], max_noise: int) -> list[str]:
    """Every evidence turn and up to `max_noise` evenly spread noise turns, in time order."""
    noise = [d for d in docs if not d.meta.get("supports")]
    step = max(1, len(noise) // max(1, max_noise))
    keep = {id(d) for d in noise[::step][:max_noise]}
    return [f"[{d.timestamp}] {d.text}" for d in docs if d.meta.get("supports") or id(d) in keep]


def instance_view(inst: Instance, docs: Sequence[Document], max_noise: int = 4) -> str:
    """The instance as an annotator reads it."""
    persona = IbaGold.of(inst).persona
    parts = [f"Persona: {persona.get('background', '?')}; traits {', '.join(persona.get('traits', []))}; "
             f"currently {persona.get('state', '?')}; role: {persona.get('role', '?')}",
             f"Scenario: {ScenarioPayload.of(inst).scenario or None}",
             "Intended preferences:\n" + "\n".join(_preferences(inst)),
             "History (preference turns, with a few unrelated turns):\n"
             + "\n".join(_history(sorted(docs, key=lambda d: instant(d.timestamp)), max_noise)),
             f"Task: {inst.query}"]
    if api := ActionPayload.of(inst).api:
        parts.append(f"API: {api['name']}, fixed by the task: {api.get('task_fixed')}")
    view = "\n\n".join(parts)
    return view if len(view) <= MAX_VIEW_CHARS else view[:MAX_VIEW_CHARS] + " [...]"


def label_messages(view: str, dimension: str) -> list[dict[str, str]]:
    user = (f"{quote('instance', view)}\n\nCriterion ({dimension}): {CRITERIA[dimension]}\n"
            'Answer {"label": 1 or 0, "reason": "<one sentence>"}.')
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": user}]


async def label_instances(model: ChatModel, instances: Sequence[Instance], documents: Mapping[str, Sequence[Document]],
                          *, repeat: int = 0, name: str | None = None,
                          dimensions: Sequence[str] = DIMENSIONS) -> LabelSet:
    """One judge run over the sampled instances; `repeat` gives an independent second run of one judge."""
    out = LabelSet(name or f"{model.name}#{repeat}")

    async def one(inst: Instance, view: str, dim: str) -> None:
        v = await binary_verdict(model, label_messages(view, dim), quoted=[view], repeat=repeat, schema=LABEL_SCHEMA,
                                 key="label")
        status = {"unscored": "unparsed"}.get(v.status, v.status)
        label = int(v.score) if v.score is not None else None
        out.unparsed += status == "unparsed"
        out.failed += status == "failed"
        out.labels.setdefault(inst.instance_id, {})[dim] = label
        out.details.append({"instance_id": inst.instance_id, "dimension": dim, "label": label, "status": status,
                            "reason": v.feedback if status == "scored" else "", "raw": v.raw,
                            "error": v.feedback if status == "failed" else ""})

    jobs = []
    for inst in instances:
        view = instance_view(inst, documents.get(inst.user_id, []))
        jobs += [one(inst, view, d) for d in dimensions]
    await asyncio.gather(*jobs)
    out.details.sort(key=lambda r: (r["instance_id"], dimensions.index(r["dimension"])))
    return out
