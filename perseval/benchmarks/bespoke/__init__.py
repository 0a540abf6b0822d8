"""Bespoke: search-augmented personalization with per-user rubrics (`papers/bespoke.txt`).

Data: `layout` (the release's files and columns), `records` (typed rows), `sessions` (chat and search
sessions split into turns), `loader` (validating reader), `export` (the official evaluator's per-user
files), `sample`, `sample_content`, `sample_ratings` (a seeded sample in the same layout), `stats` (Tables
2 and 7).
Systems: `context` (history selection, static and query-aware profiles), `respond` (the answer prompt),
`agents/responder` (every user-context setting of Table 4), `agents/evaluator` (E_p under meta-evaluation),
`agents/history_retriever` (Table 5's retrieval with query expansion), `history_retrieval` (expansion
prompts, nDCG, Table 5).
Judges: `prompts` (recall prompt, E_p answer parsing), `evaluation` (E_p and its variants),
`judges/recall`, `judges/criteria`, `judges/evaluator_scores`, `judges/feedback_match`, `judges/history_ndcg`.
Benchmarks: `benchmark` (bespoke: Table 4, Figure 4), `meta_benchmark` (bespoke-meta: Table 3),
`history_benchmark` (bespoke-history: Table 5); `analysis` and `meta_analysis` build their tables.
"""
