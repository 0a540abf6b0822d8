"""IBA-Bench (implicit behavioral alignment): taxonomy, seeded construction, agents, judges, analyses.

Modules: card (what it reads, sends and scores), taxonomy (scenarios.yaml), personas, noise, construct
(+ llm_construct), release (its official layout), qa (QA probes), prompts (the LLM slot judge's request),
benchmark (registered as "iba"), analysis*; agents/ (oracle, IBA-Agent); judges/ (iba.checkpoint, iba.slots,
the LLM slot judge iba.slot_llm, the validation labeller). The request format and the checkpoint and slot
judges, which a user's own data shares, live below the benchmarks (perseval.benchmarks.actions,
perseval.benchmarks.action_judges), as does the reading of a release folder (perseval.benchmarks.release_folder).
"""
