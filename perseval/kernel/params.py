"""Parameters of registered components: every benchmark, agent, judge and retriever declares one model.

A component's `params:` mapping (from its YAML, or from the benchmark entry of an
experiment) is validated against its `Params` model before any server starts, so
a typo or a wrong type is an error naming the file and the key, never ignored.
"""
from __future__ import annotations

import importlib
import pickle
import sys
import types
from pathlib import Path
from typing import Annotated, Any, ClassVar, Generic, Mapping, TypeVar, Union, get_args, get_origin

from pydantic import BaseModel, ConfigDict, SerializationInfo, SerializerFunctionWrapHandler, ValidationError, \
    ValidationInfo, field_validator, model_serializer
from pydantic_core import PydanticCustomError

from perseval.core.errors import ConfigError
from perseval.core.plugin_files import PLUGIN_MODULE_PREFIX, import_plugin_file

P = TypeVar("P", bound="Params")


def _bool_for_number(annotation: Any, value: Any) -> bool:
    """Whether `value` holds a bool where `annotation` wants an int or a float (at the top, or as an item of
    a list, tuple, set or dict value): pydantic would read YAML's `yes` as 1 there."""
    origin = get_origin(annotation)
    if origin is Annotated:
        return _bool_for_number(get_args(annotation)[0], value)
    if origin in (Union, types.UnionType):
        args = [a for a in get_args(annotation) if a is not type(None)]
        return not any(a is bool or a is Any for a in args) and any(_bool_for_number(a, value) for a in args)
    if annotation in (int, float):
        return isinstance(value, bool)
    if origin in (list, tuple, set, frozenset) and isinstance(value, (list, tuple, set, frozenset)):
        items = [a for a in get_args(annotation) if a is not Ellipsis]
        return any(_bool_for_number(a, v) for v in value for a in items[:1] or [Any]) if len(items) <= 1 else \
            any(_bool_for_number(a, v) for a, v in zip(items, value))
    if origin is dict and isinstance(value, dict) and len(get_args(annotation)) == 2:
        return any(_bool_for_number(get_args(annotation)[1], v) for v in value.values())
    return False


def _holds_bool(value: Any) -> bool:
    if isinstance(value, bool):
        return True
    if isinstance(value, (list, tuple, set, frozenset)):
        return any(isinstance(v, bool) for v in value)
    return isinstance(value, dict) and any(isinstance(v, bool) for v in value.values())


class NoBooleanNumbers(BaseModel):
    """Base of every config and params model: a YAML boolean (yes/no, true/false, on/off) where a number is
    expected is refused, not read as 1 or 0 (pydantic's lax mode would); an int where a float is expected
    stays fine. One check for every int and float field, of every subclass."""

    @field_validator("*", mode="before")
    @classmethod
    def _no_boolean_numbers(cls, value: Any, info: ValidationInfo) -> Any:
        if _holds_bool(value) and info.field_name in cls.model_fields and \
                _bool_for_number(cls.model_fields[info.field_name].annotation, value):
            raise PydanticCustomError("bool_for_number", "a number is expected, got a boolean ({value}: YAML reads "
                                      "yes/no, true/false and on/off as booleans); write the number",
                                      {"value": str(value).lower() if isinstance(value, bool) else value})
        return value


class Params(NoBooleanNumbers):
    """Base of every component's parameters: unknown keys are errors, values are read-only."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickled with the plugin file that defines the class, if any: a unit carries validated params to
        a Dask worker, which imports that file (under the same module name) before it restores them."""
        cls = type(self)
        module = sys.modules.get(cls.__module__)
        source = getattr(module, "__file__", None) if cls.__module__.startswith(PLUGIN_MODULE_PREFIX) else None
        return _restore, (cls.__module__, cls.__qualname__, source, pickle.dumps(self.__getstate__()))

    # Fields added after outputs were cached, each with the value that reproduces the old behaviour: a dump
    # (and so every key made from one) leaves such a field out while it holds that value, so adding a
    # setting invalidates nothing that still computes the same, and setting it to anything else does.
    # `model_dump(context=EVERY_FIELD)` keeps them all (what `perseval show` prints).
    key_compatible: ClassVar[dict[str, Any]] = {}

    @model_serializer(mode="wrap")
    def _without_legacy_values(self, handler: SerializerFunctionWrapHandler, info: SerializationInfo) -> Any:
        data = handler(self)
        if isinstance(data, dict) and not (info.context or {}).get("every_field"):
            for name, old in self.key_compatible.items():
                if name in data and getattr(self, name) == old:
                    del data[name]
        return data


def _restore(module: str, qualname: str, source: str | None, state: bytes) -> Params:
    if module not in sys.modules and source:
        import_plugin_file(Path(source))  # a worker that has not loaded the plugin file yet
    cls: Any = importlib.import_module(module)
    for part in qualname.split("."):
        cls = getattr(cls, part)
    obj = cls.__new__(cls)
    obj.__setstate__(pickle.loads(state))  # noqa: S301 (our own state, pickled just above)
    return obj


EVERY_FIELD = {"every_field": True}


class NoParams(Params):
    """For components that take no parameters: any key is an error."""


def error_lines(exc: ValidationError, prefix: str = "", model: type[BaseModel] | None = None) -> list[str]:
    """One line per problem: `key 'a.b': message` (the key as a user writes it in YAML)."""
    lines = []
    for err in exc.errors():
        key = ".".join(str(p) for p in (prefix, *err["loc"]) if p != "") or "(top level)"
        msg = err["msg"]
        if err["type"] in ("value_error", "assertion_error"):  # our validator's own words, not pydantic's prefix
            msg = str(err.get("ctx", {}).get("error") or msg.split(", ", 1)[-1])
        if err["type"] == "extra_forbidden":
            msg = "unknown key" + (f" (known: {', '.join(model.model_fields)})" if model and len(err["loc"]) == 1
                                   else "")
        lines.append(f"  key '{key}': {msg}")
    return lines


def invalid(where: str, what: str, lines: list[str]) -> str:
    """The message of a failed validation: one problem on one line (`file: key 'k': msg`), several under a
    title naming what was invalid, one line each."""
    if len(lines) == 1:
        return f"{where}: {lines[0].strip()}"
    return f"{where}: invalid {what}\n" + "\n".join(lines)


def validate_params(model: type[P], raw: Mapping[str, Any] | None, where: str, prefix: str = "params") -> P:
    """`raw` validated as `model`; a ConfigError naming `where` (a file) and each bad key otherwise."""
    try:
        return model.model_validate(dict(raw or {}))
    except ValidationError as exc:
        raise ConfigError(invalid(where, f"{prefix} for {model.__qualname__}", error_lines(exc, prefix, model))) from None


class Configurable(Generic[P]):
    """A registered component: its parameters' model is its type argument, written once
    (`class RagAgent(Agent[RagParams])`), and the constructor validates them into `self.params`.

    Constructed with a mapping (from YAML) or with an already validated `Params` instance. A subclass of a
    concrete component may still set `Params = Other` to take other parameters.
    """

    Params: ClassVar[type[Params]] = NoParams
    params: P

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        for base in cls.__dict__.get("__orig_bases__", ()):  # this class's own bases, not a parent's
            arg = next(iter(get_args(base)), None)
            if isinstance(arg, type) and issubclass(arg, Params) and "Params" not in cls.__dict__:
                cls.Params = arg

    def __init__(self, params: Params | Mapping[str, Any] | None = None):
        self.params = params if isinstance(params, self.Params) else \
            validate_params(self.Params, params, type(self).__qualname__)


class Strict(NoBooleanNumbers):
    """Unknown keys are errors; a YAML boolean where a number is expected too (`seed: yes`)."""

    model_config = ConfigDict(extra="forbid")
