"""The official PersonaMem release layout (docs/benchmarks/persona_mem.md).

A split is two files in one folder: `questions_<split>.csv`, one row per question, and
`shared_contexts_<split>.jsonl`, one line per shared context: a JSON object with one key, the
shared_context_id, whose value is the list of chat messages ({"role", "content"}) of that context. A
question sees its context up to `end_index_in_shared_context` (exclusive): the messages after it come later
in the user's life than the question.
"""
from __future__ import annotations

from pathlib import Path

SPLITS = ("32k", "128k", "1M")
DEFAULT_SPLIT = "32k"

# The seven in-situ query types of the paper, in its order.
QUESTION_TYPES = (
    "recall_user_shared_facts",
    "acknowledge_latest_user_preferences",
    "track_full_preference_evolution",
    "revisit_reasons_behind_preference_updates",
    "provide_preference_aligned_recommendations",
    "suggest_new_ideas",
    "generalize_to_new_scenarios",
)
LETTERS = ("a", "b", "c", "d")
ROLES = ("system", "user", "assistant")

REQUIRED = ("question_id", "question_type", "topic", "correct_answer", "all_options", "shared_context_id",
            "end_index_in_shared_context", "distance_to_ref_in_blocks", "distance_to_ref_in_tokens")
# The question's text: `user_question_or_message` in the release, `question` in the repository's older samples.
QUESTION_COLUMNS = ("user_question_or_message", "question")
# The persona: `persona_id` in the release; a file without it has one persona per shared context.
PERSONA_COLUMN = "persona_id"
OPTIONAL_INT = ("context_length_in_tokens", "context_length_in_letters", "num_irrelevant_tokens")
OPTIONAL_FLOAT = ("distance_to_ref_proportion_in_context",)


def questions_file(source: Path, split: str) -> Path:
    return source / f"questions_{split}.csv"


def contexts_file(source: Path, split: str) -> Path:
    return source / f"shared_contexts_{split}.jsonl"
