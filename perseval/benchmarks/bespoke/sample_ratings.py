"""Sample responses and the ratings a persona gives them, by rule.

A draft is a response plan (which claims, which tone, layout and depth); its
ratings follow from how far it departs from the persona, so the example R-J
pairs are consistent with the rubric and the history.
"""
from __future__ import annotations

from dataclasses import dataclass

from perseval.benchmarks.bespoke import sample_content as C
from perseval.benchmarks.bespoke.records import CriterionRating

_STYLES = ("examples", "steps", "bullets", "summary")
_OTHER_TONE = {"casual": "formal", "formal": "casual"}
_OTHER_DEPTH = {"novice": "expert", "expert": "novice"}


def _other_style(style: str) -> str:
    return _STYLES[(_STYLES.index(style) + 1) % len(_STYLES)]


@dataclass
class Draft:
    kind: str  # aligned | generic | off_target | wrong_style | wrong_tone | wrong_depth | partial
    claims: list[str]
    tone: str  # casual | formal | neutral
    style: str  # one of _STYLES, or paragraph
    depth: str  # novice | expert | middle

    @classmethod
    def aligned(cls, p: C.Persona, wanted: list[str]) -> "Draft":
        return cls("aligned", list(wanted), p.tone, p.style, p.expertise)

    @classmethod
    def off_target(cls, p: C.Persona, other: list[str]) -> "Draft":
        return cls("off_target", list(other), _OTHER_TONE[p.tone], _other_style(p.style), _OTHER_DEPTH[p.expertise])

    @classmethod
    def generic(cls, wanted: list[str], other: list[str]) -> "Draft":
        return cls("generic", wanted[: max(1, len(wanted) // 2)] + other[:1], "neutral", "paragraph", "middle")

    @classmethod
    def wrong_style(cls, p: C.Persona, wanted: list[str]) -> "Draft":
        return cls("wrong_style", wanted[:-1], p.tone, _other_style(p.style), p.expertise)

    @classmethod
    def wrong_tone(cls, p: C.Persona, wanted: list[str]) -> "Draft":
        return cls("wrong_tone", list(wanted), _OTHER_TONE[p.tone], p.style, p.expertise)

    @classmethod
    def wrong_depth(cls, p: C.Persona, wanted: list[str]) -> "Draft":
        return cls("wrong_depth", list(wanted), p.tone, p.style, _OTHER_DEPTH[p.expertise])

    @classmethod
    def partial(cls, p: C.Persona, wanted: list[str], other: list[str]) -> "Draft":
        return cls("partial", wanted[1:] + other[:1], "neutral", p.style, p.expertise)


_OPEN = {"casual": "Good question! Here's the short version.", "formal": "Below is a concise overview.", "neutral": ""}
_CLOSE = {"casual": "Hope that helps 🙂", "formal": "Further detail is available on request.", "neutral": ""}


def render(p: C.Persona, d: Draft) -> str:
    """The response text of a draft."""
    lead = "In plain terms:" if d.depth == "novice" else ""
    note = "Caveat: effect sizes vary with context; recent sources give the current numbers." if d.depth == "expert" else ""
    parts = (_OPEN[d.tone], lead, _layout(p, d.style, d.claims), note, _CLOSE[d.tone])
    return "\n\n".join(part for part in parts if part)


def _layout(p: C.Persona, style: str, claims: list[str]) -> str:
    if style == "bullets":
        return "\n".join(f"- {c}" for c in claims)
    if style == "steps":
        return "\n".join(f"{i}. {c}" for i, c in enumerate(claims, start=1))
    if style == "examples":
        return "\n".join(f"{c} Example: picture how this shows up in the daily work of a {p.profession}." for c in claims)
    if style == "summary":
        details = f"\n\nDetails: {' '.join(claims[1:])}" if len(claims) > 1 else ""
        return f"Bottom line: {claims[0]}{details}"
    return " ".join([claims[0], *(f"In addition, {c[0].lower()}{c[1:]}" for c in claims[1:])])


def rate(p: C.Persona, d: Draft, wanted: list[str]) -> dict[str, CriterionRating]:
    """The persona's rating of a draft on each criterion; a 5 always starts with 'Exactly'."""
    return {"need_alignment": _need(d, wanted), "content_depth": _depth(p, d),
            "tone": _tone(p, d), "explanation_style": _style(p, d)}


def _need(d: Draft, wanted: list[str]) -> CriterionRating:
    covered = len(set(d.claims) & set(wanted)) / len(wanted)
    extra = any(c not in wanted for c in d.claims)
    if covered == 1 and not extra:
        return CriterionRating(5, "Exactly what I asked about, and nothing I didn't need.")
    if covered >= 0.75:
        return CriterionRating(4, "Covers most of what I asked, but one point I wanted is missing or thin.")
    if covered >= 0.4:
        return CriterionRating(3, "Too generic: it skips some of the things I specifically asked about.")
    return CriterionRating(2, "Mostly about things I didn't ask for; my actual questions are barely touched.")


def _depth(p: C.Persona, d: Draft) -> CriterionRating:
    if d.depth == p.expertise:
        return CriterionRating(5, "Exactly the level I'm at.")
    if d.depth == "middle":
        text = "a few terms went over my head" if p.expertise == "novice" else "it stays at a level I already know"
        return CriterionRating(3, f"Understandable, but {text}.")
    text = "Too technical; I couldn't follow the jargon." if p.expertise == "novice" else "Far too basic; I know all this."
    return CriterionRating(2, text)


def _tone(p: C.Persona, d: Draft) -> CriterionRating:
    if d.tone == p.tone:
        return CriterionRating(5, "Exactly the tone I like.")
    if d.tone == "neutral":
        return CriterionRating(3, "Acceptable, but a bit robotic.")
    if p.tone == "casual":
        return CriterionRating(2, "Way too stiff and formal for me.")
    return CriterionRating(2, "Too chatty; the emoji and the exclamation marks put me off.")


def _style(p: C.Persona, d: Draft) -> CriterionRating:
    if d.style == p.style:
        return CriterionRating(5, "Exactly how I like it laid out.")
    if d.style == "paragraph":
        return CriterionRating(3, f"Readable, but one dense block. {C.STYLE_NEED[p.style]}")
    return CriterionRating(2, f"This layout doesn't suit how I read. {C.STYLE_NEED[p.style]}")
