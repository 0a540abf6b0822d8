"""How every interval is computed: an experiment's `statistics:` settings."""
from __future__ import annotations

from pydantic import Field

from perseval.kernel.params import Strict


class StatisticsSettings(Strict):
    """How every interval is computed (perseval.metrics.uncertainty): users are resampled `resamples` times
    with `seed`, and intervals are at `level`. Point estimates never depend on these."""

    level: float = Field(0.95, gt=0, lt=1)
    resamples: int = Field(2000, ge=100)
    seed: int = 0
