"""IBA-Agent (IBA-Bench paper, section 4), registered as `iba.agent`: the agent (agent.py), its settings,
run state, prompts, Deep Retrieval, Broad Thinking & Deep Alignment, and the FC controller loop."""
