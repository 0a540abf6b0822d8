"""The official LaMP-QA release layout (docs/benchmarks/lamp_qa.md).

The release is the Hugging Face dataset `alireza7/LaMP-QA`: one configuration per category, each with the
splits train, validation and test. Its repository's download script (LaMP-Benchmark/LaMP-QA,
`utils/download_datasets.py`) writes every (category, split) as one JSON list, `<Category>_<split>.json`,
into one folder; `source:` points at that folder. Each row: `id`, `question`, `narrative` (the asker's
detailed description of the need), `rubric_aspects` (a list of {"aspect", "reason", "evidence"}) and
`profile` (the asker's earlier posts, a list of {"id", "text"}).
"""
from __future__ import annotations

from pathlib import Path

# category as `categories:` names it -> the configuration name the release uses in its file names
CATEGORIES: dict[str, str] = {
    "Arts & Entertainment": "Art_and_Entertainment",
    "Lifestyle & Personal Development": "Lifestyle_and_Personal_Development",
    "Society & Culture": "Society_and_Culture",
}
SPLITS = ("train", "validation", "test")
ASPECT_FIELDS = ("aspect", "reason", "evidence")


def category_file(source: Path, category: str, split: str) -> Path:
    return source / f"{CATEGORIES[category]}_{split}.json"
