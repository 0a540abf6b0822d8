"""IBA-Bench (implicit behavioral alignment): taxonomy, seeded construction, judging and scoring.

Modules: taxonomy (scenarios.yaml), personas, noise, construct, prompts,
scoring, benchmark (registered as "iba").
"""
from perseval.benchmarks.iba.taxonomy import Taxonomy, load_taxonomy

__all__ = ["Taxonomy", "load_taxonomy"]
