"""The official Bespoke release layout: folders, Parquet files, columns, JSON value shapes.

Everything that names a file or a column lives here, so the loader and the
sample writer cannot drift apart. Column names keep the release's spelling,
hyphens included (`query-id`).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

CRITERIA: tuple[str, ...] = ("need_alignment", "content_depth", "tone", "explanation_style")
CRITERION_TITLES: dict[str, str] = {
    "need_alignment": "Need alignment",
    "content_depth": "Content depth",
    "tone": "Tone",
    "explanation_style": "Explanation style",
}
TASK_TYPES: tuple[str, ...] = ("analysis", "guidance", "recommendation", "explanation")
SCORE_MIN, SCORE_MAX = 1, 5

# JSON keys inside the *_value columns.
GOLD_KEY = "gold_information"  # {"gold_information": ["claim", ...]}
GOLD_KEY_ALIASES = ("gold_information", "gold information")  # the paper's extraction prompt uses a space
SHOT_KEYS = ("query", "gold_information_need", "response_list")
RESPONSE_TEXT_KEY = "contents"


@dataclass(frozen=True)
class TableSpec:
    """One Parquet file of the release."""

    folder: str
    file: str
    columns: tuple[str, ...]
    json_column: str | None = None  # the column holding JSON text, if any

    @property
    def relpath(self) -> str:
        return f"{self.folder}/{self.file}"

    def path(self, root: Path) -> Path:
        return Path(root) / self.folder / self.file


QUERIES = TableSpec("queries", "query_table.parquet", ("user", "query-id", "query", "gold_information_need"))
GOLD = TableSpec("gold_information", "gold_information.parquet",
                 ("user", "query-id", "id", "gold_information_value"), "gold_information_value")
RUBRIC = TableSpec("personalized_rubric", "personalized_rubric.parquet",
                   ("user", "query-id", "id", "personalized_rubric_value"))  # free text (or JSON text)
META_TEST = TableSpec("meta_test", "meta_test_set.parquet",
                      ("user", "query-id", "id", "meta_test_set_value"), "meta_test_set_value")
SHOTS = TableSpec("evaluation_shot", "evaluation_shot.parquet",
                  ("user", "query-id", "id", "evaluation_shot_value"), "evaluation_shot_value")
CHAT = TableSpec("chat_history", "chat_history.parquet", ("user", "id", "history"))
SEARCH = TableSpec("search_history", "search_history.parquet", ("user", "id", "history"))

# perseval's own additions, not part of the release (both optional): a local passage corpus for offline
# search, and the task type of each query (the paper names four; the release does not label them).
CORPUS = TableSpec("corpus", "corpus.parquet", ("id", "text"))
QUERY_TYPES = TableSpec("query_types", "query_types.parquet", ("user", "query-id", "task_type"))

# The official evaluator's per-user files (augustinLib/BESPOKE, evaluate/evaluator.py): {root}/{user}/query-id_{N}.*
OFFICIAL_FILES: dict[str, str] = {"evaluation_shot": "json", "personalized_rubric": "txt", "gold_information": "json"}

RELEASE_TABLES: tuple[TableSpec, ...] = (QUERIES, GOLD, RUBRIC, META_TEST, SHOTS, CHAT, SEARCH)
HISTORY_TABLES: dict[str, TableSpec] = {"chat": CHAT, "search": SEARCH}
