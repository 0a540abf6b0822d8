"""IBA-Bench (implicit behavioral alignment): taxonomy, seeded construction, agents, judges, analyses.

Modules: taxonomy (scenarios.yaml), personas, noise, construct (+ llm_construct), release (official
layout), qa (QA probes), prompts, answers (request format and the one API-call extraction), benchmark
(registered as "iba"), analysis*; agents/ (oracle, IBA-Agent); judges/ (iba.checkpoint, iba.slots, the
LLM slot judge iba.slot_llm, the validation labeller).
"""