"""apeb.random: a seeded random ranking of the candidates, the chance level of every cell
(Hit@1 = 1/|candidates| in expectation). Needs no model and reads no history. The shuffle derives from
the run's seed (`ctx.seed`: the benchmark entry's seed, or the experiment's), so another seed draws
another ranking and the same seed the same one."""
from __future__ import annotations

import random

from perseval.agents.base import Agent, AgentContext
from perseval.benchmarks.apeb.answers import ranking_output
from perseval.benchmarks.rankings import candidate_ids
from perseval.core.instances import AgentOutput, Instance
from perseval.kernel.registry import register_agent


@register_agent("apeb.random")
class APeBRandom(Agent):
    benchmarks = ("apeb",)
    needs = frozenset()

    async def act(self, instance: Instance, ctx: AgentContext, repeat: int, name: str) -> AgentOutput:
        ids = candidate_ids(instance)
        random.Random(f"{ctx.seed}:{instance.instance_id}:{repeat}").shuffle(ids)
        return ranking_output(instance, name, repeat, ids)
