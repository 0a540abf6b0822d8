"""Chunking histories into overlapping passages, counted in the embedder's own tokens.

A tokenizer can give up on text it has no tokens for: WordPiece turns a word longer
than 100 characters into one [UNK], a word tokenizer makes a 5 MB word one token.
Such a text would become one huge chunk (and an [UNK] decodes to nothing), so when a
text has far more characters than its tokens can account for, it is split by
characters instead, at about 4 characters a token.
"""
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


CHARS_PER_TOKEN = 4  # a token of English text, on average: the size of a character window per token
MAX_CHARS_PER_TOKEN = 32  # more characters per token than any tokenizer makes of real text: it gave up


def chunk_text(text: str, tokenizer: Any, size: int = 256, overlap: int = 50) -> list[str]:
    """Split `text` into passages of at most `size` tokens, consecutive ones sharing `overlap` tokens
    (or, where the tokenizer gave up, `size` x 4 characters sharing `overlap` x 4)."""
    if not text.strip():
        return []
    ids = tokenizer.encode(text, add_special_tokens=False)
    if len(text) > max(len(ids), 1) * MAX_CHARS_PER_TOKEN:
        return [text[a:b] for a, b in window_bounds(len(text), size * CHARS_PER_TOKEN, overlap * CHARS_PER_TOKEN)]
    if len(ids) <= size:
        return [text]
    return [tokenizer.decode(ids[a:b], skip_special_tokens=True) for a, b in window_bounds(len(ids), size, overlap)]
