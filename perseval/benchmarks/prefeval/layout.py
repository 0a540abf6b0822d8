"""The official PrefEval release layout: the repository's `benchmark_dataset/` folder (docs/benchmarks/prefeval.md).

  explicit_preference/<topic>.json                  [{preference, question, explanation}]
  implicit_preference/choice-based/<topic>.json     [{..., implicit_query, options, conversation:
                                                      {query, assistant_options, user_selection,
                                                       assistant_acknowledgment}, aligned_op}]
  implicit_preference/persona-driven/<topic>.json   [{..., persona, conversation: {turn1: {user, assistant},
                                                      ...}}]
  mcq_options/<topic>.json                          [{preference, question, explanation,
                                                      classification_task_options: [4 texts, the first
                                                      the one that follows the preference]}]
  filtered_inter_turns.json                         [{conversation: [{role, content}, ...]}]: the unrelated
                                                     turns inserted between the preference and the question
"""
from __future__ import annotations

from pathlib import Path

EXPLICIT, CHOICE, PERSONA = "explicit", "implicit-choice", "implicit-persona"
FORMS = (EXPLICIT, CHOICE, PERSONA)
GENERATION, CLASSIFICATION = "generation", "classification"
TASKS = (GENERATION, CLASSIFICATION)
FORM_DIRS = {EXPLICIT: Path("explicit_preference"), CHOICE: Path("implicit_preference") / "choice-based",
             PERSONA: Path("implicit_preference") / "persona-driven"}
MCQ_DIR = Path("mcq_options")
INTER_TURNS_FILE = Path("filtered_inter_turns.json")
LETTERS = ("A", "B", "C", "D")
CHOICE_CONVERSATION = ("query", "assistant_options", "user_selection", "assistant_acknowledgment")
