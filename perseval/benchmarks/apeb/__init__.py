"""APeB (personalized product search): seeded log construction, session mining, rule scoring.

Modules: card (what it reads, sends and scores), catalog (products), logs (users and events), sessions
(mining and candidate sets), documents (history as text), prompts (the correction turn, VQRA's refinement)
and answers (the strict reading of exactly-5), benchmark (the registered `apeb` Benchmark); agents/ (direct,
ReAct, VQRA, PPS, random, oracle), judges/ (apeb.ranking: Hit@1, Hit@5, MRR; its strict reading; the rubric).
The ranking request, its reading and the ranking judge, which a user's own rankings share, live below the
benchmarks (perseval.benchmarks.rankings, perseval.benchmarks.ranking_judge).
"""
