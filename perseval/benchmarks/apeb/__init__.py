"""APeB (personalized product search): seeded log construction, session mining, rule scoring.

Modules: catalog (products), logs (users and events), sessions (mining and
candidate sets), documents (history as text), prompts and answers (the
ranking prompt, request format and the one ranking extraction), benchmark (the
registered `apeb` Benchmark); agents/ (direct ranker, oracle), judges/
(apeb.ranking: Hit@1, Hit@5, MRR).
"""
