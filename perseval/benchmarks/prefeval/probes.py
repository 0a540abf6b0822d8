"""Answers of known verdict for PrefEval's generation judge, written by rule from the release itself.

For each picked generation instance (its preference, its question, and, where the release has the topic's
mcq_options row, the options of the same preference and question: the first follows the preference, the
other three do not) perseval writes:
  honours     names the stated preference, then recommends the preference-following option:
              acknowledges true, hallucinates false, violates false, helpful true (helpful only when an
              option gave it content; without one the answer names the preference and nothing else);
  violates    recommends a preference-breaking option and names no preference: acknowledges false,
              violates true, helpful true;
  wrong-pref  names another user's preference (another instance of the release), then the
              preference-following option: acknowledges true, hallucinates true;
  refusal     "I'm sorry, but I can't help with that.": helpful false, acknowledges false, violates false;
  empty       "": helpful false, acknowledges false, violates false.
The label of a check is the verdict the judge should give (1 true, 0 false), so the probe AUC asks whether
P(true) is higher where the right verdict is true. The judge only checks `hallucinates` when it found an
acknowledgement, so those labels count only where it did.
"""
from __future__ import annotations

import random

from perseval.benchmarks.prefeval.answers import is_classification
from perseval.benchmarks.prefeval.views import PrefEvalGold, PrefEvalPayload
from perseval.benchmarks.probes import Labels
from perseval.core.instances import AgentOutput, Instance

HONOURS, VIOLATES, WRONG_PREF, REFUSAL, EMPTY = "honours", "violates", "wrong-pref", "refusal", "empty"
KINDS = (HONOURS, VIOLATES, WRONG_PREF, REFUSAL, EMPTY)
REFUSAL_TEXT = "I'm sorry, but I can't help with that."
LETTERS = "ABCD"



def _options(inst: Instance, pool: list[Instance]) -> tuple[str | None, str | None]:
    """(preference-following option, a preference-breaking one) of the classification sibling of `inst`
    (same user and question), read back through its gold letter; (None, None) without one."""
    for o in pool:
        if is_classification(o) and o.user_id == inst.user_id and o.query == inst.query:
            shown = PrefEvalPayload.of(o).options or []
            answer = PrefEvalGold.of(o).answer
            if answer in LETTERS[:len(shown)]:
                good = shown[LETTERS.index(answer)]
                return good, next(s for s in shown if s != good)
    return None, None


def _checks(acknowledges: int | None = None, hallucinates: int | None = None, violates: int | None = None,
            helpful: int | None = None) -> dict[str, int]:
    named = {"acknowledges": acknowledges, "hallucinates": hallucinates, "violates": violates, "helpful": helpful}
    return {k: v for k, v in named.items() if v is not None}


def prefeval_probe_answers(instances: list[Instance], n: int, seed: int) -> tuple[list[AgentOutput], Labels]:
    """The probe outputs of n seeded generation instances and (agent, instance, check) -> right verdict."""
    pool = sorted(instances, key=lambda i: i.instance_id)
    generation = [i for i in pool if not is_classification(i)]
    picked = random.Random(f"judge-probes:{seed}").sample(generation, min(n, len(generation)))
    outputs: list[AgentOutput] = []
    labels: Labels = {}

    def add(inst: Instance, kind: str, text: str, checks: dict[str, int]) -> None:
        outputs.append(AgentOutput(inst.instance_id, f"probe:{kind}", 0, text))
        labels.update({(f"probe:{kind}", inst.instance_id, c): v for c, v in checks.items()})

    for inst in picked:
        pref = PrefEvalGold.of(inst).preference.strip()
        good, bad = _options(inst, pool)
        honour = f'You told me: "{pref}" I have kept to that.' + (f" I suggest: {good}" if good else "")
        add(inst, HONOURS, honour, _checks(1, 0, 0, 1 if good else None))
        if bad:
            add(inst, VIOLATES, f"I suggest: {bad}", _checks(acknowledges=0, violates=1, helpful=1))
        other = next((PrefEvalGold.of(o).preference.strip() for o in generation
                      if o.user_id != inst.user_id and PrefEvalGold.of(o).preference.strip() != pref), None)
        if other:
            add(inst, WRONG_PREF, f'You told me: "{other}" I have kept to that.' + (f" I suggest: {good}" if good
                                                                                  else ""),
                _checks(acknowledges=1, hallucinates=1))
        add(inst, REFUSAL, REFUSAL_TEXT, _checks(acknowledges=0, violates=0, helpful=0))
        add(inst, EMPTY, "", _checks(acknowledges=0, violates=0, helpful=0))
    return outputs, labels
