"""'Did you mean': the closest known names to a wrong one, or the list of what exists when none is close."""
from __future__ import annotations

import difflib
from typing import Iterable


def closest(name: str, known: Iterable[str], n: int = 3, cutoff: float = 0.6) -> list[str]:
    """The known names nearest to `name` (difflib's ratio, best first); empty when none is close."""
    return difflib.get_close_matches(name, sorted(set(known)), n=n, cutoff=cutoff)


def suggestion(name: str, known: Iterable[str]) -> str:
    """What to tell a user who typed `name`: "did you mean 'x'?" when some known names are close, else the
    known names (a typo is fixed from the first, a wrong guess from the second)."""
    known = sorted(set(known))
    near = closest(name, known)
    if near:
        return "did you mean " + " or ".join(repr(k) for k in near) + "?"
    return f"known: {', '.join(repr(k) for k in known) or 'none'}"
