"""LaMP's metrics by rule, as the official evaluation defines them (docs/protocols/lamp.md).

Classification (LaMP-1, LaMP-2): accuracy, and the macro F1 over the task's whole label set, where an
answer outside the set counts for no label (a miss for the gold's label, a false positive for none).
Rating (LaMP-3): the absolute and squared error of the rating; an answer that is no number is scored as
the worse of 1 and 5 (the official rule), never left out. Generation (LaMP-4..7): ROUGE-1 and ROUGE-L
F-measures, shared with LongLaMP (perseval.metrics.rouge). tests/test_lamp.py checks these against
scikit-learn, tests/test_rouge.py the ROUGE against the rouge-score package.
"""
from __future__ import annotations

from typing import Sequence


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
