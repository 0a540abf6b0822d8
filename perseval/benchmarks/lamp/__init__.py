"""LaMP (Salemi et al., ACL 2024; lamp-benchmark.github.io): seven personalization tasks, each question with
its user's profile, scored by rule against one gold output.

  layout.py     the official release files per task and split, the tasks' kinds, profile fields and labels
  loader.py     row-by-row reading of *_questions.json and *_outputs.json into instances and profile documents
  prompts.py    the paper's prompt construction: each profile item formatted per task, then the input
  answers.py    the request format (prompt and the one answer extraction) the generic agents use
  metrics.py    accuracy / macro F1, absolute and squared error, ROUGE-1 / ROUGE-L, by rule
  benchmark.py  the registered benchmark: params, build, stats, the run's tables
  analysis.py   the paper's table (per task: its metrics), with user-clustered intervals
  judges/       lamp.rule, the rule judge of every task
  agents/       random-k profile items, the oracle (the gold output); BM25 / dense top-k is the generic `rag`
"""
