"""Reading YAML, for every file perseval reads as YAML: an experiment (its overrides too), the component configs it
names (a plugin benchmark's among them), the components.yaml manifests, a benchmark's own YAML.

Each is read the same way, and each problem is one line naming the file and the line:
- a key written twice in one mapping is refused (YAML would keep the last one silently);
- anchors and aliases may not expand past MAX_VALUES values. PyYAML builds an alias as a second reference to its
  anchor's object, so a small file of nested aliases (a "billion laughs" bomb) loads in milliseconds; what walks
  it later (validating, hashing the settings, logging them to MLflow) meets every repetition, and a run grew past
  3 GB that way. The node graph is measured before anything is constructed: its size with every alias expanded
  (each node counts one, a long scalar one more per SCALAR_CHARS characters) must stay within the bound: every
  config perseval ships holds 3,735 values together (the largest experiment 197), the largest YAML it ships
  (IBA's scenario taxonomy) 21,124.
"""
from __future__ import annotations

from collections.abc import Hashable
from pathlib import Path
from typing import Any

import yaml

from perseval.core import files
from perseval.core.errors import ConfigError, InputError

MAX_VALUES = 100_000  # values after alias expansion
SCALAR_CHARS = 1_000  # a scalar counts one value more per this many characters: a long text aliased often
_OVER = MAX_VALUES + 1  # sizes are capped here: a bomb's true size would be a number of a billion digits


# libyaml's parser where PyYAML was built with it (IBA's 430 KB scenario taxonomy: 0.38 s instead of 2.3 s),
# the same safe constructors either way
_SAFE = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _Loader(_SAFE):  # type: ignore[misc, valid-type]
    """A safe loader that refuses a key written twice in one mapping."""


MERGE_TAG = "tag:yaml.org,2002:merge"  # `<<: *base`: the base's keys, which the mapping's own may replace


def _mapping(loader: _Loader, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
    seen: set[Any] = set()
    for key_node, _ in node.value:
        if key_node.tag == MERGE_TAG:
            continue
        key = loader.construct_object(key_node, deep=deep)
        if not isinstance(key, Hashable):  # construct_mapping names it
            continue
        if key in seen:
            raise ConfigError(f"line {key_node.start_mark.line + 1}: key {key!r} is written twice")
        seen.add(key)
    return loader.construct_mapping(node, deep=deep)


_Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _mapping)


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [n for pair in node.value for n in pair]
    return []


def expanded_sizes(root: yaml.Node) -> dict[int, int]:
    """id(node) -> how many values it holds with its aliases expanded (capped just past MAX_VALUES). An alias is
    the same node object as its anchor, so each distinct node is measured once: linear in the file's length. An
    alias met inside its own anchor (`&a [*a]`) expands without end, and counts as past the bound."""
    sizes: dict[int, int] = {}
    opened: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, children_done = stack.pop()
        if id(node) in sizes:
            continue
        children = _children(node)
        if children_done or not children:
            own = 1 + (len(node.value) // SCALAR_CHARS if isinstance(node, yaml.ScalarNode) else 0)
            sizes[id(node)] = min(own + sum(sizes[id(c)] for c in children), _OVER)
        elif id(node) in opened:  # depth first: an open node met again is one of its own descendants
            sizes[id(node)] = _OVER
        else:
            opened.add(id(node))
            stack.append((node, True))
            stack.extend((c, False) for c in children if id(c) not in sizes)
    return sizes


def _culprit(root: yaml.Node, sizes: dict[int, int]) -> tuple[yaml.Node, bool]:
    """The innermost node that alone expands past the bound (where the repetition is written), and whether it
    holds an alias of itself or of a node around it (`&a [*a]`: without end)."""
    node, around = root, {id(root)}
    while True:
        over = [c for c in _children(node) if sizes[id(c)] > MAX_VALUES]
        if any(id(c) in around for c in over):
            return node, True
        if not over:
            return node, False
        node = over[0]
        around.add(id(node))


def _not_yaml(exc: yaml.YAMLError) -> str:
    """PyYAML's several lines as one: `line L, column C: not valid YAML: <problem> (<context> at line L')`."""
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None) or str(exc)
    where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
    context, at = getattr(exc, "context", None), getattr(exc, "context_mark", None)
    said = f" ({context}{f' at line {at.line + 1}' if at is not None else ''})" if context else ""
    return " ".join(f"{where}not valid YAML: {problem}{said}".split())


def parse_yaml(text: str, where: str) -> Any:
    """The one YAML document in `text` (None when empty); ConfigError `<where>, line N: ...` for text that is no
    YAML, a key written twice, or aliases that expand past MAX_VALUES values. `where`: the file, as the user knows
    it."""
    reader = _Loader(text)
    try:
        node = reader.get_single_node()
        if node is None:
            return None
        sizes = expanded_sizes(node)
        if sizes[id(node)] > MAX_VALUES:
            culprit, endless = _culprit(node, sizes)
            line = culprit.start_mark.line + 1
            if endless:
                raise ConfigError(f"line {line}: holds an alias of itself (or of a value around it), which repeats "
                                  "without end; write the value out")
            raise ConfigError(f"line {line}: its anchors and aliases expand to more than {MAX_VALUES:,} values (an "
                              "alias bomb?); write the values out, or repeat fewer of them")
        return reader.construct_document(node)
    except ConfigError as exc:  # a key written twice, an alias bomb: `line N: ...`
        raise ConfigError(f"{where}, {exc}") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"{where}, {_not_yaml(exc)}") from None
    finally:
        reader.dispose()


def read_yaml_file(path: Path) -> Any:
    """The YAML file at `path`, read as parse_yaml reads text; a folder, a link loop, an unreadable file or a byte
    that is not UTF-8 is one ConfigError naming the file (and the line)."""
    try:
        text = files.read_text(path, missing="file not found")
    except InputError as exc:
        raise ConfigError(str(exc)) from None
    return parse_yaml(text, str(path))
