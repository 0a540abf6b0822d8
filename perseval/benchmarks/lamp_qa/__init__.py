"""LaMP-QA (Salemi & Zamani 2025, arXiv 2506.00137): personalized long-form question answering. Each question
comes with its asker's profile (earlier posts) and rubric aspects a personalized answer should address; an LLM
judge scores every aspect.

  layout.py     the official release files (one JSON list per category and split)
  loader.py     row-by-row reading of a file into instances and profile documents
  prompts.py    the answering prompt (profile items, question; the oracle's points) and the judge's prompt
  answers.py    the request format the generic agents use, and the one answer extraction
  benchmark.py  the registered benchmark: params, build, probes, stats, the run's tables
  analysis.py   the paper's table (per category: the mean score), with user-clustered intervals
  judges/       lamp_qa.aspects, the paper's per-aspect judge (0/1/2 per aspect)
  agents/       the oracle (the gold aspects as the points to cover); random-k is the generic random_k and
                BM25 / dense top-k the generic `rag`
"""
