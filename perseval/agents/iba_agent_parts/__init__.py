"""Parts of the IBA-Agent (paper section 4): settings, run state, prompts, the two modules, the FC loop."""
