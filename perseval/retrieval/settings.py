"""How histories are chunked, indexed and searched: the settings of configs/retrievers/ files."""
from __future__ import annotations

from typing import Any

from pydantic import Field, model_validator

from perseval.kernel.params import Strict


class ChunkingConfig(Strict):
    size: int = Field(256, gt=0)  # tokens of the retriever's tokenizer (words for sparse retrievers)
    overlap: int = Field(50, ge=0)

    @model_validator(mode="after")
    def _overlap(self) -> "ChunkingConfig":
        if self.overlap >= self.size:
            raise ValueError("chunking.overlap must be smaller than chunking.size")
        return self


class RetrieverConfig(Strict):
    """A registered retriever kind (dense, bm25, ...): how histories are chunked, indexed and searched."""

    name: str
    kind: str = "dense"
    chunking: ChunkingConfig = ChunkingConfig()
    params: dict[str, Any] = {}
