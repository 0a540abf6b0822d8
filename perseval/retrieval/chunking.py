"""Chunking histories into overlapping passages, counted in the embedder's own tokens."""
from __future__ import annotations

from typing import Any, Protocol


class Tokenizer(Protocol):
    def encode(self, text: str, add_special_tokens: bool = ...) -> list[int]: ...
    def decode(self, ids: list[int], skip_special_tokens: bool = ...) -> str: ...


def window_bounds(n_tokens: int, size: int, overlap: int) -> list[tuple[int, int]]:
    """[start, end) token windows of `size` with `overlap`; the last window ends at the text's end."""
    if size <= 0 or not 0 <= overlap < size:
        raise ValueError("need size > 0 and 0 <= overlap < size")
    if n_tokens <= size:
        return [(0, n_tokens)] if n_tokens else []
    step, bounds, start = size - overlap, [], 0
    while True:
        end = min(start + size, n_tokens)
        bounds.append((start, end))
        if end == n_tokens:
            return bounds
        start += step


def chunk_text(text: str, tokenizer: Any, size: int = 256, overlap: int = 50) -> list[str]:
    """Split `text` into passages of at most `size` tokens, consecutive ones sharing `overlap` tokens."""
    ids = tokenizer.encode(text, add_special_tokens=False)
    if len(ids) <= size:
        return [text] if text.strip() else []
    return [tokenizer.decode(ids[a:b], skip_special_tokens=True) for a, b in window_bounds(len(ids), size, overlap)]
