"""The official LaMP release layout (docs/benchmarks/lamp.md).

Each task's split is two JSON files, as the download site serves them:
`<source>/LaMP_<n>/<split>/<split>_questions.json` (a list of {"id", "input", "profile": [items]}) and
`<source>/LaMP_<n>/<split>/<split>_outputs.json` ({"task": "LaMP_<n>", "golds": [{"id", "output"}]}).
The time-based split lives under `<source>/time/LaMP_<n>/...`. The movie-tagging LaMP-2 is also served
under `LaMP_2/new/<split>/`; the loader accepts that folder, and the files directly in `LaMP_<n>/`.
LaMP-6 (email subjects, from the Avocado corpus) is not public: a user who built it with the release's
script points `source:` at a folder that holds `LaMP_6/` and lists LaMP-6 in `tasks`.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

Kind = Literal["classification", "rating", "generation"]
SPLITS = ("train", "dev", "test")
SETTINGS = ("user", "time")  # user-based and time-based splits


@dataclass(frozen=True)
class TaskSpec:
    name: str  # LaMP-<n>, as the paper writes it
    kind: Kind
    fields: tuple[str, ...]  # what every profile item of the task holds besides id (and date)
    marker: str  # the retrieval query is the input after this marker ("" : the two quoted titles of LaMP-1)
    labels: tuple[str, ...] = ()  # the closed label set of a classification or rating task

    @property
    def folder(self) -> str:
        return self.name.replace("-", "_")


MOVIE_TAGS = ("sci-fi", "based on a book", "comedy", "action", "twist ending", "dystopia", "dark comedy",
              "classic", "psychology", "fantasy", "romance", "thought-provoking", "social commentary", "violence",
              "true story")
TASKS: dict[str, TaskSpec] = {t.name: t for t in (
    TaskSpec("LaMP-1", "classification", ("title", "abstract"), "", ("[1]", "[2]")),
    TaskSpec("LaMP-2", "classification", ("description", "tag"), "description:", MOVIE_TAGS),
    TaskSpec("LaMP-3", "rating", ("text", "score"), "review:", ("1", "2", "3", "4", "5")),
    TaskSpec("LaMP-4", "generation", ("text", "title"), "article:"),
    TaskSpec("LaMP-5", "generation", ("title", "abstract"), "paper:"),
    TaskSpec("LaMP-6", "generation", ("text", "title"), ":"),
    TaskSpec("LaMP-7", "generation", ("text",), ":"),
)}
PUBLIC_TASKS = tuple(t for t in TASKS if t != "LaMP-6")


def task_folder(source: Path, task: str, split: str, setting: str) -> Path:
    """The folder holding `split`'s two files of `task` (the first candidate that has the questions file)."""
    root = source / "time" if setting == "time" else source
    base = root / TASKS[task].folder
    candidates = (base / split, base / "new" / split, base)
    return next((c for c in candidates if questions_file(c, split).is_file()), candidates[0])


def questions_file(folder: Path, split: str) -> Path:
    return folder / f"{split}_questions.json"


def outputs_file(folder: Path, split: str) -> Path:
    return folder / f"{split}_outputs.json"
