"""How every interval is computed: an experiment's `statistics:` settings."""
from __future__ import annotations

from typing import Literal

from pydantic import Field

from perseval.kernel.params import Strict


class StatisticsSettings(Strict):
    """How every interval is computed (perseval.metrics.uncertainty): intervals are at `level`; a paired
    test over more than 12 users draws `resamples` random sign patterns with `seed` (up to 12, every
    pattern); `weighting` names the estimand ("instance": the mean over the scored instances, "user": the
    mean of users' means), the only one of these a point estimate depends on."""

    level: float = Field(0.95, gt=0, lt=1)
    resamples: int = Field(2000, ge=100)
    seed: int = 0
    # the estimand: the mean over scored instances, or the mean of users' means (perseval.metrics.uncertainty)
    weighting: Literal["instance", "user"] = "instance"
