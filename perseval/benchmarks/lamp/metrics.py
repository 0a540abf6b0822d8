"""LaMP's metrics by rule, as the official evaluation defines them (docs/protocols/lamp.md).

Classification (LaMP-1, LaMP-2): accuracy, and the macro F1 over the task's whole label set, where an
answer outside the set counts for no label (a miss for the gold's label, a false positive for none).
Rating (LaMP-3): the absolute and squared error of the rating; an answer that is no number is scored as
the worse of 1 and 5 (the official rule), never left out. Generation (LaMP-4..7): ROUGE-1 and ROUGE-L
F-measures with the `rouge-score` package's default tokenization (lower case, runs of anything but a-z and
0-9 split tokens, no stemming). tests/test_lamp.py checks every one against scikit-learn / rouge-score.
"""
from __future__ import annotations

import re
from collections import Counter
from typing import Sequence

_NON_ALNUM = re.compile(r"[^a-z0-9]+")


def tokens(text: str) -> list[str]:
    return _NON_ALNUM.sub(" ", text.lower()).split()


def _f(overlap: int, n_pred: int, n_ref: int) -> float:
    if not n_pred or not n_ref or not overlap:
        return 0.0
    p, r = overlap / n_pred, overlap / n_ref
    return 2 * p * r / (p + r)


def _lcs(a: list[str], b: list[str]) -> int:
    row = [0] * (len(b) + 1)
    for x in a:
        prev = 0  # the diagonal cell: the row above, one column left
        for j, y in enumerate(b, 1):
            prev, row[j] = row[j], prev + 1 if x == y else max(row[j], row[j - 1])
    return row[-1]


def rouge1(prediction: str, reference: str) -> float:
    """ROUGE-1 F-measure in [0, 1]."""
    p, r = tokens(prediction), tokens(reference)
    return _f(sum((Counter(p) & Counter(r)).values()), len(p), len(r))


def rouge_l(prediction: str, reference: str) -> float:
    """ROUGE-L (longest common subsequence) F-measure in [0, 1]."""
    p, r = tokens(prediction), tokens(reference)
    return _f(_lcs(p, r), len(p), len(r))


def rating_value(text: str | None, gold: float) -> float:
    """The rating an answer gives; no rating: the worse of 1 and 5 for this gold (the official rule)."""
    if text is not None:
        try:
            return float(text)
        except ValueError:
            pass
    return 1.0 if abs(1 - gold) > abs(5 - gold) else 5.0


def macro_f1(golds: Sequence[str], preds: Sequence[str | None], labels: Sequence[str]) -> float:
    """Macro F1 over `labels` (each label's F1, 0 where it is undefined, averaged); a prediction outside
    `labels` (or None) is a miss that counts for no label."""
    scores = []
    for label in labels:
        tp = sum(g == label and p == label for g, p in zip(golds, preds))
        fp = sum(g != label and p == label for g, p in zip(golds, preds))
        fn = sum(g == label and p != label for g, p in zip(golds, preds))
        scores.append(2 * tp / (2 * tp + fp + fn) if tp else 0.0)
    return sum(scores) / len(scores)
