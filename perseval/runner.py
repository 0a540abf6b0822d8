"""Running agents and judges over a shard of instances, many requests in flight at once.

Throughput comes from concurrency against one server (vLLM batches them), not
from threads per instance. An exception inside one agent or judge call is
recorded for that instance and never loses the rest of the shard.
"""
from __future__ import annotations

import asyncio
import traceback
from typing import Any, Awaitable, TypeVar

from perseval.agents.base import Agent, AgentContext
from perseval.benchmarks.base import Benchmark, JudgeBinding
from perseval.records import AgentOutput, Instance, InstanceScore, Judgment

T = TypeVar("T")


async def _gather(coros: list[Awaitable[T]]) -> list[T]:
    return list(await asyncio.gather(*coros))


async def run_agent_shard(agent: Agent, agent_name: str, instances: list[Instance], ctx: AgentContext,
                          repeats: int) -> list[AgentOutput]:
    async def one(inst: Instance, rep: int) -> AgentOutput:
        visible = inst if agent.reads_gold else inst.public()
        try:
            return await agent.act(visible, ctx, rep, agent_name)
        except Exception as exc:  # an agent bug on one instance is data, not a lost shard
            return AgentOutput(inst.instance_id, agent_name, rep, "", status="failed",
                               error=f"{type(exc).__name__}: {exc}\n{traceback.format_exc(limit=5)}"[:4000])

    return await _gather([one(i, r) for i in instances for r in range(repeats)])


async def judge_shard(benchmark: Benchmark, instances: dict[str, Instance], outputs: list[AgentOutput],
                      bindings: list[JudgeBinding | None]) -> list[Judgment]:
    async def one(out: AgentOutput, binding: JudgeBinding | None) -> list[Judgment]:
        inst = instances[out.instance_id]
        try:
            return await benchmark.judge(inst, out, binding)
        except Exception as exc:  # recorded as a failed judgment with the error as its raw text
            name = binding.name if binding else "rule"
            rep = binding.repeat if binding else 0
            return [Judgment(out.instance_id, out.agent, out.repeat, name, rep, "*", "error", None, "failed",
                             raw=f"{type(exc).__name__}: {exc}"[:4000])]

    nested = await _gather([one(o, b) for o in outputs for b in bindings])
    return [j for js in nested for j in js]


def score_outputs(benchmark: Benchmark, instances: dict[str, Instance], outputs: list[AgentOutput],
                  judgments: list[Judgment]) -> list[InstanceScore]:
    """Instance-level scores for every (output, judge, judge repeat) that has judgments."""
    by_output: dict[tuple[str, str, int], AgentOutput] = {(o.instance_id, o.agent, o.repeat): o for o in outputs}
    groups: dict[tuple[Any, ...], list[Judgment]] = {}
    for j in judgments:
        groups.setdefault((j.instance_id, j.agent, j.repeat, j.judge, j.judge_repeat), []).append(j)
    scores: list[InstanceScore] = []
    for (iid, agent, rep, _judge, _jrep), js in sorted(groups.items()):
        scores += benchmark.score(instances[iid], by_output[(iid, agent, rep)], js)
    return scores
