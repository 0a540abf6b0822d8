"""PersonaMem (bowen-upenn/PersonaMem, MIT): multiple-choice questions on persona-oriented multi-session chats.

  layout.py     the official release files (questions_<split>.csv, shared_contexts_<split>.jsonl) and columns
  loader.py     row-by-row reading of both files into instances (one question) and documents (one message)
  answers.py    the request format: the question with its four options, one letter back
  benchmark.py  the registered benchmark: params, build, stats, the run's tables
  analysis.py   accuracy per query type and by distance of the evidence from the question, with intervals
  judges/       persona_mem.choice, the rule judge of the multiple-choice accuracy
  agents/       the long-context agent, RAG over the sessions before the question, the oracle
"""
