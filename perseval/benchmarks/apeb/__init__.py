"""APeB (personalized product search): seeded log construction, session mining, rule scoring.

Modules: catalog (products), logs (users and events), sessions (mining and
candidate sets), documents (history as text), prompts and answers (the
single-step ranking agent's prompt and answer extraction), benchmark (the
registered `apeb` Benchmark).
"""
