import pytest

from perseval.retrieval.chunking import chunk_text, window_bounds


def test_windows_hand_computed():
    assert window_bounds(0, 256, 50) == []
    assert window_bounds(100, 256, 50) == [(0, 100)]
    # step 206: 0-256, 206-462, 412-600
    assert window_bounds(600, 256, 50) == [(0, 256), (206, 462), (412, 600)]
    assert window_bounds(10, 4, 1) == [(0, 4), (3, 7), (6, 10)]


def test_windows_reject_bad_overlap():
    with pytest.raises(ValueError):
        window_bounds(10, 4, 4)


class WordTokenizer:
    """One token per word, so the expected chunks can be written by hand."""

    def encode(self, text, add_special_tokens=False):
        return text.split()

    def decode(self, ids, skip_special_tokens=True):
        return " ".join(ids)


def test_chunk_text_overlaps():
    text = " ".join(f"w{i}" for i in range(10))
    chunks = chunk_text(text, WordTokenizer(), size=4, overlap=1)
    assert chunks == ["w0 w1 w2 w3", "w3 w4 w5 w6", "w6 w7 w8 w9"]
    assert chunk_text("short text", WordTokenizer(), size=4, overlap=1) == ["short text"]
    assert chunk_text("   ", WordTokenizer(), size=4, overlap=1) == []
