"""History events as readable documents: one line of text per event."""
from __future__ import annotations

from perseval.benchmarks.apeb.catalog import Catalog
from perseval.benchmarks.apeb.logs import Event
from perseval.records import Document

_VERBS = {"view": "viewed", "purchase": "bought", "order": "ordered"}


def event_text(event: Event, catalog: Catalog) -> str:
    if event.kind in _VERBS:
        p = catalog.by_id[event.product_id]
        return f"{_VERBS[event.kind]}: {p.title} ({p.brand}, ${p.price:.2f})"
    if event.kind == "search":
        return f'searched: "{event.text}"'
    if event.kind == "video":
        return f"watched video: {event.text}"
    return f"watched live stream: {event.text}"


def event_documents(user_id: str, events: list[Event], catalog: Catalog) -> list[Document]:
    """One Document per event, ids in time order."""
    return [
        Document(owner=user_id, doc_id=f"{user_id}-e{i:04d}", text=event_text(e, catalog),
                 timestamp=e.ts.isoformat(), meta={"event": e.kind, "product_id": e.product_id,
                                                   "category": e.category})
        for i, e in enumerate(events)
    ]
