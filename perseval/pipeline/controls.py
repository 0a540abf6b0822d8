"""Controls: the same agent on the same instances with one input changed, to say what a score means.

`swapped-history` runs an agent with ANOTHER user's history: a seeded derangement of the users of the
benchmark's data, so every user's history serves exactly one other user. The query, the candidate set,
the search results (corpus, gold information) and the instance itself stay the instance's own; only
`retrieve(owner, ...)` and `documents(owner)` of the instance's user are answered from the swapped user's
history. Own score minus swapped score is the personalization gain: what this user's history, not some
user's history, brings.

That covers every history-derived input only while search reads no history. Bespoke's corpus may hold
every user's visited-page summaries (`corpus_page_summaries: true`, the class default the quickstart keeps):
search then returns the user's own pages in the swapped run too, and the gain is biased toward 0. The
paper and CPU configs turn them off (docs/protocols/bespoke.md; tests/test_bespoke_search_history.py checks
both).

A control is a variant of a RunUnit (perseval.pipeline.plan): its key is the plain run's key plus the control's
name and the derangement seed, so the plain runs and their keys are untouched when a control is on. An
agent that uses no history (no `retrieve`, no `documents`) gets no swapped run: its output cannot
depend on whose history it is, so its personalization gain is 0 by construction.

Oracles: IBA's oracle reads the evidence tags of the history it is given, so under the swap it reads
the swapped user's tags and answers with that user's preferences for the instance's scenario (when that
user has evidence for it): a wrong-user answer, which is the honest control. The derangement pairs users
whose first instance shares its group and scenario where the data allows, so that the other user's
history is about the same task. Oracles that read the instance's gold (APeB's, Bespoke's gold
information) use no history and get no swapped run.
"""
from __future__ import annotations

import random
from collections import defaultdict
from dataclasses import dataclass, replace
from typing import Any, Iterable, Mapping, Sequence

from perseval.agents.base import AgentContext
from perseval.core.hashing import content_key
from perseval.core.instances import AgentOutput, Document, Instance, Passage
from perseval.benchmarks.views import ScenarioPayload

SWAPPED_HISTORY = "swapped-history"
CONTROL_NAMES = (SWAPPED_HISTORY,)
HISTORY_CAPABILITIES = frozenset({"retrieve", "documents"})
CONTROL_VERSION = 1  # bump when what a control changes in a run changes


@dataclass(frozen=True)
class Control:
    """One control of a run: its name and the seed of its derangement."""

    name: str
    seed: int


def uses_history(needs: Iterable[str]) -> bool:
    """Whether an agent that requires `needs` can see a user's history at all."""
    return bool(HISTORY_CAPABILITIES & set(needs))


def control_run_key(run_key: str, control: Control) -> str:
    return content_key("run-control", CONTROL_VERSION, run_key, control.name, control.seed)


def control_runs(runs: Sequence[Any], needs: Iterable[str], controls: Sequence[str],
                 seed: int) -> list[Any]:
    """The control variants of an agent's plain `runs` (none for an agent that uses no history)."""
    if not uses_history(needs):
        return []
    out = []
    for name in controls:
        control = Control(name, seed)
        out += [replace(r, key=control_run_key(r.key, control), control=control) for r in runs]
    return out


# --- the derangement --------------------------------------------------------------------------------------

def _stratum(instance: Instance) -> tuple[str, str]:
    return instance.group, ScenarioPayload.of(instance).scenario


def derangement(instances: Iterable[Instance], seed: int) -> dict[str, str]:
    """User -> the other user whose history it is given: a permutation with no fixed point.

    Users whose first instance (by id) shares group and scenario are deranged among themselves; the users
    left alone in their stratum are deranged together (one left alone joins the first cycle). One user in
    all: nobody to swap with, an empty map."""
    first: dict[str, tuple[str, str]] = {}
    for inst in sorted(instances, key=lambda i: i.instance_id):
        first.setdefault(inst.user_id, _stratum(inst))
    strata: dict[tuple[str, str], list[str]] = defaultdict(list)
    for user in sorted(first):
        strata[first[user]].append(user)
    rng = random.Random(f"{SWAPPED_HISTORY}:{seed}")
    cycles: list[list[str]] = []
    alone: list[str] = []
    for key in sorted(strata):
        users = strata[key]
        rng.shuffle(users)
        if len(users) > 1:
            cycles.append(users)
        else:
            alone.extend(users)
    if len(alone) > 1:
        rng.shuffle(alone)
        cycles.append(alone)
    elif alone and cycles:
        cycles[0].append(alone[0])
    return {c[i]: c[(i + 1) % len(c)] for c in cycles for i in range(len(c))}


def owner_swap(control: Control | None, instances: Iterable[Instance]) -> dict[str, str] | None:
    """The owner map of a run: None for a plain run, else the derangement of its data's users."""
    if control is None:
        return None
    if control.name != SWAPPED_HISTORY:
        raise ValueError(f"unknown control {control.name!r}; known: {list(CONTROL_NAMES)}")
    return derangement(instances, control.seed)


# --- applying it to a run ---------------------------------------------------------------------------------

def history_owners(items: Iterable[Instance], swap: Mapping[str, str] | None) -> set[str]:
    """Whose histories a shard reads: its users', or under a swap the users they are given."""
    return {(swap or {}).get(i.user_id, i.user_id) for i in items}


def swapped_items(items: list[Instance], swap: Mapping[str, str] | None) -> list[Instance]:
    """The instances a run acts on: all of a plain run; under a swap only those whose user has a partner
    (a user alone in the data has no other history: no output, so the pair is left out, not scored 0)."""
    return items if swap is None else [i for i in items if i.user_id in swap]


def swapped_context(ctx: AgentContext, swap: Mapping[str, str] | None) -> AgentContext:
    """`ctx` whose history of a user is the swapped user's; the corpus and search are left as they are."""
    if not swap:
        return ctx
    retrieve, documents = ctx.retrieve, ctx.documents
    if retrieve is not None:
        async def swapped_retrieve(owner: str, query: str, k: int) -> list[Passage]:
            return await retrieve(swap.get(owner, owner), query, k)

        ctx.retrieve = swapped_retrieve
    if documents is not None:
        def swapped_documents(owner: str) -> list[Document]:
            return documents(swap.get(owner, owner))

        ctx.documents = swapped_documents
    return ctx


def mark_outputs(outputs: list[AgentOutput], control: Control | None, swap: Mapping[str, str] | None,
                 by_id: Mapping[str, Instance]) -> list[AgentOutput]:
    """Each output of a control run says, in its trace, whose history it was given."""
    if control is None or swap is None:
        return outputs
    for out in outputs:
        user = by_id[out.instance_id].user_id
        out.trace.append({"step": "control", "control": control.name, "seed": control.seed, "user": user,
                          "history_of": swap.get(user)})
    return outputs


def control_label(control: Any) -> str:
    return f" [{control.name}]" if control is not None else ""
