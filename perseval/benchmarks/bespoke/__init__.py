"""Bespoke: search-augmented personalization with per-user rubrics (`papers/bespoke.txt`).

Modules: `layout` (the release's files and columns), `records` (typed rows),
`loader` (validating reader), `sample` (a seeded sample in the same layout),
`prompts` (judge prompts and answer parsing), `benchmark` (the registered
benchmark: build, judge, score).
"""
