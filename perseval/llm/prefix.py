"""Requests that share a long prompt prefix, sent one after another so the server computes the prefix once.

A judge asks about all checkpoints of one response at once (asyncio.gather), an APeB agent about the four
query/candidate variants of one session: prompts that share everything up to the last question. Sent
together, each lands on its own llama-server slot and every slot computes the shared part again; the
server copies a prompt to its host-memory cache only from a slot left idle, so the others cannot take it
from there while the first is still being answered. Through a PrefixGate they go one after another: each
finds the prefix in the slot the one before it just left (llama-server picks the idle slot whose cached
prompt shares the longest prefix), while requests of other prefixes fill the other slots.

Only the order of sending changes: every request is sent as it was and answered as before.
"""
from __future__ import annotations

import asyncio
from contextlib import asynccontextmanager
from typing import AsyncIterator

SHARE = 0.5  # a prompt follows one in flight that holds at least this share of it as a prefix ...
MIN_CHARS = 400  # ... and at least this many characters (~100 tokens: less is not worth a wait)


def shared_head(prompt: str) -> str:
    """The head a prompt in flight must start with for `prompt` to wait for it (empty: too short to bother)."""
    n = max(MIN_CHARS, int(SHARE * len(prompt)))
    return prompt[:n] if len(prompt) >= n else ""


class PrefixGate:
    """The prompts in flight of one client (one event loop); those sharing a prefix go in turn, in order."""

    def __init__(self) -> None:
        self._inflight: list[tuple[str, asyncio.Event]] = []

    def _ahead(self, head: str) -> asyncio.Event | None:
        return next((done for prompt, done in self._inflight if prompt.startswith(head)), None)

    @asynccontextmanager
    async def turn(self, prompt: str) -> AsyncIterator[None]:
        """Wait while a prompt sharing this one's prefix is in flight, then go (and be waited for)."""
        head = shared_head(prompt)
        while head and (ahead := self._ahead(head)) is not None:
            await ahead.wait()
        entry = (prompt, asyncio.Event())
        self._inflight.append(entry)
        try:
            yield
        finally:
            self._inflight.remove(entry)
            entry[1].set()
