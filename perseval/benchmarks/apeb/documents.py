"""History events as readable documents: one line of text per event (what agents read and retrievers index)."""
from __future__ import annotations

from perseval.benchmarks.apeb.catalog import Catalog, Product
from perseval.benchmarks.apeb.logs import Event
from perseval.core.instances import Document

_PRODUCT_VERBS = {"view": "viewed", "like": "liked", "cart": "added to cart", "order": "ordered"}
_CONTENT = {"video": "video", "live": "live stream"}
_CONTENT_VERBS = {"view": "watched", "like": "liked"}


def product_phrase(p: Product) -> str:
    brand = f"{p.brand}, " if p.brand else ""
    return f"{p.title} ({brand}${p.price:.2f})"


def event_text(event: Event, catalog: Catalog) -> str:
    if event.action == "search":
        return f'searched: "{event.text}"'
    if event.on_product:
        return f"{_PRODUCT_VERBS[event.action]}: {product_phrase(catalog.by_id[event.product_id])}"
    return f"{_CONTENT_VERBS[event.action]} {_CONTENT[event.target]}: {event.text}"


def event_documents(user_id: str, events: list[Event], catalog: Catalog) -> list[Document]:
    """One Document per event, ids in time order."""
    return [
        Document(owner=user_id, doc_id=f"{user_id}-e{i:05d}", text=event_text(e, catalog),
                 timestamp=e.ts.isoformat(),
                 meta={"action": e.action, "target": e.target, "product_id": e.product_id, "category": e.category})
        for i, e in enumerate(events)
    ]
