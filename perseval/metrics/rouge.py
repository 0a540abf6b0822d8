"""ROUGE-1 and ROUGE-L F-measures, as the `rouge-score` package computes them (LaMP's and LongLaMP's
generation metrics).

Tokenization is rouge-score's default: lower case, every run of characters other than a-z and 0-9 splits
tokens, no stemming. ROUGE-L is the longest common subsequence of the two token lists (not the
sentence-split ROUGE-Lsum). tests/test_rouge.py checks both against the package on short and long texts.
"""
from __future__ import annotations

import re
from collections import Counter

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
