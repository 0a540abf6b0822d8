"""LLM-mode construction: the template planner decides, models only write the surface text.

Everything that is ground truth comes from the template build: users, personas,
preferences, which turn carries which signal (Document.meta), turn positions,
timestamps and ids. A user-simulator model rewrites each evidence turn's user
message from the persona and that turn's hidden signals, an assistant model
answers it, and a task writer phrases the request (it must keep the task's
concrete details, or the template query is kept). Noise turns keep their
template text unless `rewrite_noise` is set (at 100 noise turns per evidence
turn that is two requests per noise turn).

A request that fails or yields nothing usable keeps the template text and is
counted (`info["llm"]`), never dropped: the instance stays valid and its gold
unchanged. The output is the same Instance/Document schema as template mode.
"""
from __future__ import annotations

import asyncio
from collections import Counter
from dataclasses import dataclass, replace
from typing import Literal

from pydantic import Field

from perseval.benchmarks.iba import llm_prompts as P
from perseval.benchmarks.iba.taxonomy import Scenario, Taxonomy
from perseval.benchmarks.iba.views import IbaGold, IbaPayload
from perseval.llm.base import ChatModel
from perseval.kernel.params import Params
from perseval.core.instances import Document, Instance

Pair = tuple[Instance, list[Document]]
ROLES = ("user", "assistant", "task")  # user simulator, assistant, task writer


class Construction(Params):
    """`params.construction` of an IBA entry: template text (seeded, offline) or text written by models."""

    mode: Literal["template", "llm"] = "template"
    user_model: str | None = None  # llm mode: model names per role; None: the experiment's first backbone
    assistant_model: str | None = None
    task_model: str | None = None
    rewrite_noise: bool = False  # also rewrite noise turns (costly at 100 per evidence turn)
    max_in_flight: int = Field(8, ge=1)  # instances rewritten at once; requests per server are bounded by its client
    max_tokens: int = Field(160, ge=1)  # per written turn or task
    temperature: float | None = None  # None: each model's own sampling


@dataclass
class Writers:
    """The models bound to the three construction roles (one model may fill several)."""

    user: ChatModel
    assistant: ChatModel
    task: ChatModel


def split_turn(text: str) -> tuple[str, str]:
    """'User: u\\nAssistant: a' -> (u, a)."""
    user, _, assistant = text.partition("\nAssistant: ")
    return user.removeprefix("User: "), assistant


class SurfaceWriter:
    """Rewrites instances (query, evidence turns, optionally noise) with the three role models."""

    def __init__(self, taxonomy: Taxonomy, writers: Writers, params: Construction | None = None):
        self.taxonomy, self.writers, self.params = taxonomy, writers, params or Construction()
        self.stats: Counter[str] = Counter()
        self._slots = asyncio.Semaphore(self.params.max_in_flight)

    async def _ask(self, model: ChatModel, system: str, user: str, role: str) -> str | None:
        result = await model.chat([{"role": "system", "content": system}, {"role": "user", "content": user}],
                                  max_tokens=self.params.max_tokens, temperature=self.params.temperature)
        self.stats[f"requests.{role}"] += 1
        if result.status != "ok":
            self.stats[f"failed.{role}"] += 1
            return None
        text = P.clean_turn(result.text)
        if not text:
            self.stats[f"empty.{role}"] += 1
        return text or None

    async def task_text(self, inst: Instance, gold: IbaGold, scenario: Scenario) -> str:
        keep = [str(v) for v in gold.task_case.values()]
        text = await self._ask(self.writers.task, P.TASK_SYSTEM,
                               P.task_request(scenario.name, scenario.action_type, inst.query, keep), "task")
        if text is None or not P.keeps_details(text, keep):
            self.stats["fallback.task"] += 1  # a request that drops a task detail would change the task
            return inst.query
        return text

    def _signals(self, doc: Document, gold: IbaGold, scenario: Scenario) -> list[dict[str, str]]:
        previous = {p["dimension"]: p["previous"] for p in gold.preferences}
        persona = gold.persona
        out = []
        for s in doc.meta["supports"]:
            dim = scenario.dimension(s["dimension"])
            sig = {"dimension": dim.name, "value": dim.value(s["value"]).label, "kind": s["kind"]}
            if s["dynamic_phase"] == "new" and previous.get(s["dimension"]):
                sig["previous"] = dim.value(previous[s["dimension"]]).label
                sig["reason"] = f"you are now {persona.get('role', 'in a new role')} and {persona.get('state', 'busy')}"
            out.append(sig)
        return out

    async def _exchange(self, doc: Document, system: str, brief: str, kind: str) -> Document:
        template_user, template_assistant = split_turn(doc.text)
        user = await self._ask(self.writers.user, system, brief, "user")
        if user is None:
            self.stats[f"fallback.{kind}"] += 1
            return doc
        answer = await self._ask(self.writers.assistant, P.ASSISTANT_SYSTEM, user, "assistant")
        if answer is None:
            self.stats[f"fallback.{kind}_assistant"] += 1
        self.stats[f"rewritten.{kind}"] += 1
        return replace(doc, text=f"User: {user}\nAssistant: {answer or template_assistant}")

    async def _turn(self, doc: Document, gold: IbaGold, scenario: Scenario, system: str) -> Document:
        if doc.meta.get("supports"):
            brief = P.evidence_request(scenario.name, self._signals(doc, gold, scenario), split_turn(doc.text)[0])
            return await self._exchange(doc, system, brief, "evidence")
        if self.params.rewrite_noise:
            return await self._exchange(doc, system, P.noise_request(split_turn(doc.text)[0]), "noise")
        return doc

    async def rewrite(self, inst: Instance, docs: list[Document]) -> Pair:
        """The instance with a written query, and its history with written turns; ids, meta, gold unchanged."""
        gold = IbaGold.of(inst)  # one view per instance, read by every turn
        scenario = self.taxonomy.scenario(IbaPayload.of(inst).scenario)
        system = P.user_system(gold.persona)
        async with self._slots:
            query, *turns = await asyncio.gather(self.task_text(inst, gold, scenario),
                                                 *(self._turn(d, gold, scenario, system) for d in docs))
        return replace(inst, query=query), list(turns)

    async def rewrite_chunk(self, chunk: list[Pair]) -> list[Pair]:
        return list(await asyncio.gather(*(self.rewrite(i, d) for i, d in chunk)))
