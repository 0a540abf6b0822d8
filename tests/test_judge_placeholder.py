"""A verdict whose reason is empty or the prompt's placeholder copied ("<one sentence>", the exact text 8 of
395 quickstart assessments carried as passes, issue 32) is unscored with its raw text, never a pass; an
answer cut off before its reason keeps its verdict (the schema puts the verdict first for that)."""
from __future__ import annotations

import asyncio
import json

import pytest

from perseval.core.parsing import reason_problem
from perseval.judges.binary import binary_verdict

from .scripted import ScriptedChat

PLACEHOLDER = "<one sentence>"  # the IBA checkpoint prompt's own slot: 'Answer {"verdict": ..., "reason": "<one sentence>"}'


def _verdict(text: str):
    return asyncio.run(binary_verdict(ScriptedChat(text), [{"role": "user", "content": "q"}]))


@pytest.mark.parametrize("answer", [{"verdict": True, "reason": PLACEHOLDER}, {"verdict": False, "reason": PLACEHOLDER},
                                    {"verdict": True, "reason": ""}, {"verdict": True, "reason": "   "},
                                    {"verdict": True, "reason": "<reason>"}])
def test_a_placeholder_or_empty_reason_is_unscored_never_a_pass(answer):
    text = json.dumps(answer)
    v = _verdict(text)
    assert (v.score, v.status, v.raw) == (None, "unscored", text)
    assert ("placeholder" in v.feedback) == bool(answer["reason"].strip()) and "verdict is not read" in v.feedback


def test_a_real_reason_and_a_cut_off_answer_keep_their_verdict():
    assert _verdict(json.dumps({"verdict": True, "reason": "it lists the steps in the morning"})).score == 1.0
    cut = _verdict('{"verdict": false, "reason": "The plan ign')
    assert (cut.score, cut.status) == (0.0, "scored")
    assert reason_problem('{"verdict": true}', structured=True) is None  # no reason member: nothing to judge it by
    # a reason that merely mentions angle brackets is the judge's own
    assert reason_problem(json.dumps({"verdict": True, "reason": "uses <b> tags as asked"}), structured=True) is None
