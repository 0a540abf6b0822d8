"""PrefEval (amazon-science/PrefEval, CC BY-NC 4.0): does a model follow a preference stated, or only shown,
many turns earlier in a conversation?

  layout.py     the official benchmark_dataset/ folder: forms, topics, file names
  loader.py     row-by-row reading of every file into instances and preference turns
  answers.py    the request format: the question (generation) or its four options (classification)
  benchmark.py  the registered benchmark: forms x tasks x inter-turn settings, stats, the run's tables
  analysis.py   preference-following accuracy and the error types per form and inter-turn setting
  judges/       prefeval.generation (LLM: four checks, four error types), prefeval.classification (rule)
  agents/       zero-shot and reminder (the whole conversation), RAG over the exchanges, the oracle
"""
