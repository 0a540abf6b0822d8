"""The product catalogue of a behaviour log: every product an event names, with what an agent sees of it.

Schema (docs/apeb-log-schema.md, products table): id, category, title, price, and optionally brand and
attributes. The same model serves ingested catalogues and the seeded one of `synth_catalog`.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True, slots=True)
class Product:
    product_id: str
    title: str
    category: str
    price: float
    brand: str = ""
    attributes: tuple[str, ...] = ()

    def card(self) -> dict[str, Any]:
        """The fields an agent sees for a candidate."""
        return {"id": self.product_id, "title": self.title, "brand": self.brand, "price": self.price,
                "category": self.category, "attributes": list(self.attributes)}

    def text(self) -> str:
        """One line of searchable text: title, brand, category and attributes (lexical and dense matching)."""
        parts = [self.title, self.brand, self.category.replace("_", " "), *self.attributes]
        return " ".join(p.replace("-", " ") for p in parts if p)


@dataclass
class Catalog:
    products: list[Product]
    by_id: dict[str, Product] = field(init=False)
    _by_category: dict[str, list[Product]] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.by_id = {p.product_id: p for p in self.products}
        self._by_category = {}
        for p in self.products:
            self._by_category.setdefault(p.category, []).append(p)

    def in_category(self, category: str) -> list[Product]:
        return list(self._by_category.get(category, []))

    @property
    def categories(self) -> list[str]:
        return list(self._by_category)
