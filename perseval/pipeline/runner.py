"""Running agents and judges over a shard of instances, many requests in flight at once.

Throughput comes from concurrency against one server (vLLM batches them), not
from threads per instance. An exception inside one agent or judge call is
recorded for that instance and never loses the rest of the shard.
"""
from __future__ import annotations

import asyncio
import traceback
from dataclasses import replace
from typing import Awaitable, Sequence, TypeVar

from perseval.agents.base import Agent, AgentContext
from perseval.judges.base import Judge, JudgeBinding
from perseval.core.instances import AgentOutput, Instance, InstanceScore, Judgment
from perseval.core.redact import redact
from perseval.llm.client import SENT

T = TypeVar("T")


async def _gather(coros: list[Awaitable[T]]) -> list[T]:
    return list(await asyncio.gather(*coros))


def _error(exc: BaseException) -> str:
    return redact(f"{type(exc).__name__}: {exc}\n{traceback.format_exc(limit=5)}")[:4000]


async def run_agent_shard(agent: Agent, agent_name: str, instances: Sequence[Instance], ctx: AgentContext,
                          repeats: int) -> list[AgentOutput]:
    async def one(inst: Instance, rep: int) -> AgentOutput:
        visible = inst if agent.reads_gold else inst.public()
        sent: list[str] = []
        SENT.set(sent)  # this task's own context: the client notes each request key the agent makes here
        try:
            out = await agent.act(visible, ctx, rep, agent_name)
        except Exception as exc:  # an agent bug on one instance is data, not a lost shard
            out = AgentOutput(inst.instance_id, agent_name, rep, "", status="failed", error=_error(exc))
        out.requests = sent
        return out

    return await _gather([one(i, r) for i in instances for r in range(repeats)])


async def judge_shard(judges: Sequence[Judge], bindings: Sequence[JudgeBinding], instances: dict[str, Instance],
                      outputs: Sequence[AgentOutput]) -> list[Judgment]:
    """Every judge that applies to an output's instance, once per binding (judge repeat).

    A failed output is not an answer (the request failed, the agent said nothing): no judge sees it, so it
    has no judgment and no score; the tables count it beside the score and the cell is incomplete."""
    async def one(judge: Judge, out: AgentOutput, binding: JudgeBinding) -> list[Judgment]:
        inst = instances[out.instance_id]
        try:
            return await judge.judge(inst, out, binding)
        except Exception as exc:  # recorded as a failed judgment with the error as its raw text
            return [judge.judgment(inst, out, binding, "*", None, "failed", raw=_error(exc))]

    nested = await _gather([one(j, o, b) for o in outputs if o.status != "failed" for b in bindings for j in judges
                            if j.applies(instances[o.instance_id])])
    return [j for js in nested for j in js]


def score_outputs(judges: Sequence[Judge], instances: dict[str, Instance], outputs: Sequence[AgentOutput],
                  judgments: Sequence[Judgment]) -> list[InstanceScore]:
    """Instance-level scores for every (output, judge repeat, judge) that has judgments."""
    by_output = {(o.instance_id, o.agent, o.repeat): o for o in outputs}
    by_item = {j.item: j for j in judges}
    groups: dict[tuple[str, str, int, int, str], list[Judgment]] = {}
    for j in judgments:
        groups.setdefault((j.instance_id, j.agent, j.repeat, j.judge_repeat, j.kind), []).append(j)
    scores: list[InstanceScore] = []
    for (iid, agent, rep, _jrep, item), js in sorted(groups.items()):
        inst, out = instances[iid], by_output[(iid, agent, rep)]
        scores += _failed_not_unscored(by_item[item], inst, out, js, by_item[item].score(inst, out, js))
    return scores


def _failed_not_unscored(judge: Judge, inst: Instance, out: AgentOutput, js: list[Judgment],
                         scores: list[InstanceScore]) -> list[InstanceScore]:
    """Failed and unscored are different facts: an item whose judgment failed (counted beside the scores as a
    failed judgment) is not also counted unscored. Each judge counts its own items, so the counts are those
    of a second scoring in which the failed judgments stand as scored; the values stay the first scoring's."""
    if not any(j.status == "failed" for j in js):
        return scores
    as_scored = [replace(j, status="scored", score=0.0) if j.status == "failed" else j for j in js]
    counts = {s.metric: s.n_unscored for s in judge.score(inst, out, as_scored)}
    return [replace(s, n_unscored=min(s.n_unscored, counts.get(s.metric, s.n_unscored))) for s in scores]
