"""apeb.random: a seeded random ranking of the candidates, the chance level of every cell
(Hit@1 = 1/|candidates| in expectation). Needs no model and reads no history."""
from __future__ import annotations

import random

from perseval.agents.base import Agent, AgentContext
from perseval.benchmarks.apeb.answers import candidate_ids, ranking_output
from perseval.params import Params
from perseval.records import AgentOutput, Instance
from perseval.registry import register_agent


class RandomParams(Params):
    seed: int = 0


@register_agent("apeb.random")
class APeBRandom(Agent):
    Params = RandomParams
    params: RandomParams
    benchmarks = ("apeb",)
    needs = frozenset()

    async def act(self, instance: Instance, ctx: AgentContext, repeat: int, name: str) -> AgentOutput:
        ids = candidate_ids(instance)
        random.Random(f"{self.params.seed}:{instance.instance_id}:{repeat}").shuffle(ids)
        return ranking_output(instance, name, repeat, ids)
