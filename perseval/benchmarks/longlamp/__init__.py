"""LongLaMP (Kumar et al. 2024; longlamp-benchmark.github.io): personalized long-form generation, each row with
its user's profile, scored by rule (ROUGE) against the user's own text.

  card.py       the one page: data read, prompt templates, answer reading, judge, metrics, control, analyses
  layout.py     the official release files per task, setting and split; each task's user id and item fields
  loader.py     row-by-row reading of <task>_<setting>/<split>.json into instances and profile documents
  prompts.py    the paper's prompt construction: each profile item in its task's template, then the input
  answers.py    the request format (prompt and the one answer extraction) the generic agents use
  benchmark.py  the registered benchmark: params, build, stats, the run's tables
  analysis.py   the paper's table (per task ROUGE-1 and ROUGE-L), with user-clustered intervals
  judges/       longlamp.rule, ROUGE-1 / ROUGE-L by rule (perseval.metrics.rouge)
  agents/       the oracle (the gold output); k random items is random_k, BM25 / dense top-k the generic `rag`
"""
