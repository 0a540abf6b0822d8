"""Bespoke: search-augmented personalization with per-user rubrics (`papers/bespoke.txt`).

Modules: `layout` (the release's files and columns), `records` (typed rows),
`loader` (validating reader), `sample` (a seeded sample in the same layout),
`prompts` (judge and responder prompts, judge answer parsing), `benchmark` (the
registered benchmark and its task format); `agents/` (the responder), `judges/`
(bespoke.recall, bespoke.criteria).
"""
