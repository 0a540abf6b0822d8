"""Answers of known verdict for a judge, written from the gold items a benchmark knows (Benchmark.known_items).

For n seeded instances that have such items perseval writes, per instance:
  gold        the items stated outright (every checkpoint's statement, every gold claim): each should pass;
  empty       an empty answer: each should fail;
  wrong-user  the items of another user's instance of the same scenario: an item fails where the benchmark
              says another user's answer does not satisfy it (Benchmark.wrong_user_fails).
A benchmark whose judges check something else writes its own (Benchmark.probe_answers: PrefEval's checks).
"""
from __future__ import annotations

import random
from typing import Any, Callable

from perseval.benchmarks.views import ScenarioPayload
from perseval.core.instances import AgentOutput, Instance

GOOD, EMPTY, WRONG = "gold", "empty", "wrong-user"
KnownItem = tuple[str, str, str]  # (item id, statement, value)
Labels = dict[tuple[str, str, str], int]  # (probe agent, instance, item) -> the right verdict, 1 or 0


def known_item_probes(known_items: Callable[[Instance], list[KnownItem]],
                      wrong_user_fails: Callable[[str, str, dict[str, tuple[str, str]]], bool],
                      instances: list[Instance], n: int, seed: int) -> tuple[list[AgentOutput], Labels]:
    """The probe outputs of n seeded instances with known items, and their labels."""
    pool = sorted((i for i in instances if known_items(i)), key=lambda i: i.instance_id)
    picked = random.Random(f"judge-probes:{seed}").sample(pool, min(n, len(pool)))
    outputs: list[AgentOutput] = []
    labels: Labels = {}
    for inst in picked:
        items = known_items(inst)
        outputs += [AgentOutput(inst.instance_id, f"probe:{GOOD}", 0, "\n".join(s for _, s, _ in items)),
                    AgentOutput(inst.instance_id, f"probe:{EMPTY}", 0, "")]
        labels |= {(f"probe:{GOOD}", inst.instance_id, i): 1 for i, _, _ in items}
        labels |= {(f"probe:{EMPTY}", inst.instance_id, i): 0 for i, _, _ in items}
        other = _other(inst, pool)
        if other is not None:
            theirs = {i: (s, v) for i, s, v in known_items(other)}
            outputs.append(AgentOutput(inst.instance_id, f"probe:{WRONG}", 0, "\n".join(s for s, _ in theirs.values())))
            labels |= {(f"probe:{WRONG}", inst.instance_id, i): 0 for i, _, v in items if wrong_user_fails(i, v, theirs)}
    return outputs, labels


def _other(inst: Instance, pool: list[Instance]) -> Instance | None:
    """Another user's instance of the same scenario (any other user's where a benchmark has no scenarios)."""
    scenario = ScenarioPayload.of(inst).scenario
    same = [o for o in pool if o.user_id != inst.user_id and ScenarioPayload.of(o).scenario == scenario]
    return same[0] if same else None


def checkpoint_items(checkpoints: list[dict[str, Any]] | None) -> list[KnownItem]:
    """Checkpoints (IBA's and the custom layout's) as known items: id, the statement, the preferred value."""
    return [(str(c["id"]), str(c["statement"]), str(c.get("value", ""))) for c in checkpoints or []]


def differs(item_id: str, value: Any, theirs: dict[str, tuple[str, str]]) -> bool:
    """Another user's answer fails an item it also has with another value (a checkpoint of another preference)."""
    return item_id in theirs and theirs[item_id][1] != value
