"""`make install` puts llama-cpp-python's JSON-schema-to-GBNF converter (its llama_grammar.py, from the sdist
infra/llama-server/build.py builds from) beside llama-server, so the default install needs no llama-cpp-python:
that file must make the very grammar the installed package makes, for every schema perseval sends and for the
schema features those use or may use (enums, arrays with bounds, nested objects, numbers)."""
from __future__ import annotations

import importlib
import importlib.util
import json
import pkgutil
from typing import Any

import pytest

import perseval
from perseval.llm.embedded import GRAMMAR_NAME, llama_server_binary

llama_grammar = pytest.importorskip("llama_cpp.llama_grammar", reason="the [llama-cpp] extra is not installed "
                                    "(`make test` installs it): nothing to compare the copy with")

FEATURES: list[dict[str, Any]] = [
    {"type": "object", "properties": {"verdict": {"type": "boolean"}, "reason": {"type": "string"}},
     "required": ["verdict", "reason"]},
    {"type": "object", "properties": {"rank": {"type": "array", "items": {"type": "string"}, "minItems": 1,
                                               "maxItems": 5}}, "required": ["rank"]},
    {"type": "object", "properties": {"score": {"type": "integer", "minimum": 0, "maximum": 10},
                                      "p": {"type": "number"}, "label": {"enum": ["a", "b", "c"]},
                                      "inner": {"type": "object", "properties": {"x": {"type": "string",
                                                                                       "maxLength": 40}}}},
     "required": ["score", "label"]},
]


def shipped_schemas() -> dict[str, dict[str, Any]]:
    """Every module-level `*_SCHEMA` dict of perseval (what agents and judges send), by module and name."""
    found: dict[str, dict[str, Any]] = {}
    for info in pkgutil.walk_packages(perseval.__path__, "perseval."):
        module = importlib.import_module(info.name)
        for name, value in vars(module).items():
            if name.endswith("_SCHEMA") and isinstance(value, dict) and value.get("type") == "object":
                found[f"{info.name}.{name}"] = value
    return found


def _installed_converter():
    path = llama_server_binary().parent / GRAMMAR_NAME
    spec = importlib.util.spec_from_file_location("installed_grammar", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_copy_makes_the_packages_grammar_for_every_schema_perseval_sends():
    json_schema_to_gbnf = _installed_converter().json_schema_to_gbnf
    schemas = shipped_schemas()
    assert len(schemas) >= 5  # the judges' verdicts and rubrics, the agents' rankings and selections
    for name, schema in [*schemas.items(), *((f"feature {i}", s) for i, s in enumerate(FEATURES))]:
        text = json.dumps(schema)
        assert json_schema_to_gbnf(text) == llama_grammar.json_schema_to_gbnf(text), name
