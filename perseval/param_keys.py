"""Params that gain fields without moving the keys of outputs already computed.

A run or judge key hashes its component's `params.model_dump()`. A field added later whose default
reproduces what the component did before would still change that dump (the new name appears in it), and
so every key of every existing config, though nothing it computes has changed. Such a field is listed in
`key_neutral`: while it holds its default it is left out of the dump, so the key stays; any other value
is in the dump and keys the output as usual.

`effective_params(p)` is every field with its value, neutral or not: what will really be used, for a
reader (`perseval show`) rather than for a key.
"""
from __future__ import annotations

from typing import Any, ClassVar

from pydantic import SerializationInfo, SerializerFunctionWrapHandler, model_serializer

from perseval.params import Params

EFFECTIVE = "effective"  # serialization context flag: dump every field


class KeyStableParams(Params):
    key_neutral: ClassVar[frozenset[str]] = frozenset()  # fields added after keys were published

    @model_serializer(mode="wrap")
    def _dump(self, handler: SerializerFunctionWrapHandler, info: SerializationInfo) -> Any:
        data = handler(self)
        if (info.context or {}).get(EFFECTIVE) or not isinstance(data, dict):
            return data
        fields = type(self).model_fields
        for name in self.neutral_fields():
            if name in data and getattr(self, name) == fields[name].get_default(call_default_factory=True):
                del data[name]
        return data

    def neutral_fields(self) -> frozenset[str]:
        """The fields left out of this dump at their default (a subclass may keep one in: a value whose
        meaning changed must get a new key, so that no output stored under the old meaning is reused)."""
        return self.key_neutral


def effective_params(params: Params) -> dict[str, Any]:
    """Every field of `params` with its value (JSON types), including key-neutral fields at their default."""
    return params.model_dump(mode="json", context={EFFECTIVE: True})
