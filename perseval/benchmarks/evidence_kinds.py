"""The kinds of preference evidence a history turn may carry, after IBA-Bench's Table 12: each kind's signal
category and score contribution, and the cap of a turn's salience.

IBA-Bench's construction tags the turns it writes with them (perseval.benchmarks.iba.evidence), IBA-Agent's
re-ranker weighs turns by them, and a release's or a user's own history turns are read with them
(perseval.benchmarks.release_rows).
"""
from __future__ import annotations

# Table 12: evidence kind -> (signal category, score contribution low, high). A rejection of a
# proposed draft is explicit feedback on an output, so it counts as a revision.
TABLE12 = {
    "correction": ("explicit_revision", 3, 4),
    "rejection": ("explicit_revision", 3, 4),
    "complaint": ("complaint_or_affect", 3, 4),
    "statement": ("direct_statement", 2, 2),
    "behaviour": ("implicit_behaviour", 1, 1),
}
SALIENCE_CAP = 10  # a turn's salience is the sum of its signals' contributions, capped here
