"""Read-only containers for what must not change once built: an instance's payload and gold.

A judge or an agent that wrote into `gold` would change what every later reader of the same instance sees
(and a cached score would no longer match its data key). `freeze` turns nested dicts and lists into
subclasses of dict and list whose mutating methods raise, so code that reads them (json.dumps,
isinstance(x, dict), iteration, indexing) works unchanged and a write fails where it happens.
"""
from __future__ import annotations

from typing import Any, NoReturn


class FrozenError(TypeError):
    """A write to data that is read-only after construction."""


def _refuse(self: Any, *args: Any, **kwargs: Any) -> NoReturn:
    raise FrozenError(f"{type(self).__name__} is read-only: an instance's payload and gold are fixed when the "
                      "benchmark is built; build a new dict (dict(x) / copy.deepcopy(x)) to change a copy")


class FrozenDict(dict):
    __slots__ = ()
    __setitem__ = __delitem__ = __ior__ = _refuse
    clear = pop = popitem = setdefault = update = _refuse

    def __reduce__(self) -> tuple[Any, ...]:  # pickled as its items, not by replaying writes
        return FrozenDict, (dict(self),)

    def __copy__(self) -> dict:
        return dict(self)

    def __deepcopy__(self, memo: dict) -> dict:
        return thaw(self)


class FrozenList(list):
    __slots__ = ()
    __setitem__ = __delitem__ = __iadd__ = __imul__ = _refuse
    append = clear = extend = insert = pop = remove = reverse = sort = _refuse

    def __reduce__(self) -> tuple[Any, ...]:
        return FrozenList, (list(self),)

    def __copy__(self) -> list:
        return list(self)

    def __deepcopy__(self, memo: dict) -> list:
        return thaw(self)


def freeze(value: Any) -> Any:
    """`value` with every dict and list in it made read-only (a frozen value is returned as it is)."""
    if isinstance(value, (FrozenDict, FrozenList)):
        return value
    if isinstance(value, dict):
        return FrozenDict({k: freeze(v) for k, v in value.items()})
    if isinstance(value, list):
        return FrozenList(freeze(v) for v in value)
    return value


def thaw(value: Any) -> Any:
    """A plain, writable deep copy of a frozen value."""
    if isinstance(value, dict):
        return {k: thaw(v) for k, v in value.items()}
    if isinstance(value, list):
        return [thaw(v) for v in value]
    return value
