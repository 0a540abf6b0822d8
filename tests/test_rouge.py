"""ROUGE-1 and ROUGE-L (perseval.metrics.rouge, LaMP's and LongLaMP's generation metrics) equal the rouge-score
package's F-measures, on short titles and on long texts of a few hundred words."""
from __future__ import annotations

import random

import pytest
from rouge_score import rouge_scorer

from perseval.metrics.rouge import rouge1, rouge_l

PAIRS = [("Bike parking coming to every station", "Council adds bike parking at stations"),
         ("The cat sat on the mat", "the cat, the mat and the hat"),
         ("Long-term creep of CLT floors (5 years)", "Long-term creep of cross laminated timber floors"),
         ("", "an empty prediction scores zero"), ("no overlap at all", "something different"),
         ("ÉCOLE naïve café 2024", "ecole naive cafe 2024"), ("a a a b", "a b b b a")]


def long_text(rng: random.Random, n: int) -> str:
    """n words of a small vocabulary with punctuation and case, so long subsequences and repeats occur."""
    words = ["the", "model", "reviews", "Battery", "life", "is", "great,", "but", "screen", "(2024)", "we", "propose",
             "a", "method", "for", "user-specific", "writing;", "results", "improve", "ROUGE."]
    return " ".join(rng.choice(words) for _ in range(n))


def _long_pairs() -> list[tuple[str, str]]:
    rng = random.Random(7)
    return [(long_text(rng, rng.randint(150, 400)), long_text(rng, rng.randint(150, 400))) for _ in range(4)]


@pytest.mark.parametrize("pred, ref", PAIRS + _long_pairs())
def test_rouge_equals_the_rouge_score_package(pred, ref):
    scores = rouge_scorer.RougeScorer(["rouge1", "rougeL"], use_stemmer=False).score(ref, pred)
    assert rouge1(pred, ref) == pytest.approx(scores["rouge1"].fmeasure, abs=1e-12)
    assert rouge_l(pred, ref) == pytest.approx(scores["rougeL"].fmeasure, abs=1e-12)
