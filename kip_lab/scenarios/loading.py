"""Reading scenario files, and saying exactly what is wrong with a bad one; writing files whole.

A bad file raises ``ScenarioError``, never a traceback: one line per problem, in the style
``file.yaml:12: members.A.max_poll_interval_ms: Input should be greater than 0, got -5``,
so an editor can jump to it. Lines come from PyYAML's composed node tree, which keeps the
position of every key: a pydantic error location (a path of keys and indexes) is walked
down that tree to the key it names.

The reader is built for hostile input too. A file is read only up to ``MAX_FILE_BYTES``, and
one pass over the parser's events (linear in the file's size) refuses, before any tree is
built: nesting deeper than ``MAX_DEPTH``, tags (``!!int``, ``!foo``), an alias to itself,
and aliases that would expand the document past ``MAX_NODES`` values ("billion laughs").
The tree is then checked for keys that are not plain values, duplicate keys, integers
outside a signed 64-bit long and numbers that are not finite (``.inf``, ``.nan``).
"""

from __future__ import annotations

import difflib
import math
import re
import reprlib
import types
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

from kip_lab.contract import checked
from kip_lab.errors import KipLabError
from kip_lab.files import open_without_waiting
from kip_lab.scenarios.model import LONG_MAX, FieldError, Scenario

Loc = tuple[str | int, ...]

MAX_FILE_BYTES = 1 << 20  # 1 MiB: a scenario or sweep spec is a few KB
MAX_DEPTH = 64  # nested mappings and lists, aliases expanded
MAX_NODES = 100_000  # values in the document, aliases expanded
_INT_TAG, _FLOAT_TAG, _BOOL_TAG = "tag:yaml.org,2002:int", "tag:yaml.org,2002:float", "tag:yaml.org,2002:bool"
# Plain values YAML 1.1 (PyYAML) and YAML 1.2's core schema read differently: refused, so that a file
# means one thing. 1.1 reads 20:00 as 1200 (base 60), 010 as 8 (octal), 0b11 as 3, 1_000 as 1000 and
# yes/no/on/off as booleans; 1.2 reads them all as text, and 010 as 10.
_YAML_1_1_ONLY = tuple(
    (re.compile(pattern), meaning)
    for pattern, meaning in (
        (r"[-+]?[0-9][0-9_]*(:[0-5]?[0-9])+(\.[0-9_]*)?", "is a base-60 number in YAML 1.1 and text in 1.2"),
        (r"[-+]?0[0-7_]+", "is octal in YAML 1.1 and decimal in 1.2; write it without the leading 0"),
        (r"[-+]?0b[01_]+", "is binary in YAML 1.1 and text in 1.2; write the number in decimal"),
        (r"[-+]?[0-9.][0-9._]*_[0-9._]*([eE][-+]?[0-9]+)?", "has _ separators: a number in YAML 1.1, text in 1.2"),
        (r"yes|Yes|YES|no|No|NO|on|On|ON|off|Off|OFF", "is a boolean in YAML 1.1 and text in 1.2; write true or false"),
    )
)
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml's parser when PyYAML has it: ~10x faster
_NUMBERS = yaml.SafeLoader("")  # builds int and float scalars the way PyYAML will


@dataclass(frozen=True)
class Problem:
    """One thing wrong with a scenario: where (field path and line) and what was expected."""

    path: str
    line: int | None
    message: str


class ScenarioError(KipLabError):
    """A scenario that cannot be read or is not valid; ``str()`` is the report for a person."""

    def __init__(self, source: str, problems: list[Problem]) -> None:
        self.source = source
        self.problems = problems
        super().__init__("\n".join(self._format(p) for p in problems))

    def _format(self, problem: Problem) -> str:
        where = self.source if problem.line is None else f"{self.source}:{problem.line}"
        return f"{where}: {problem.path}: {problem.message}" if problem.path else f"{where}: {problem.message}"


def read_limited(path: str | Path) -> str:
    """The text of a file of at most ``MAX_FILE_BYTES`` (reading no more than that), or a ScenarioError."""
    path = Path(path)
    try:
        if path.is_dir():
            raise IsADirectoryError("it is a directory")
        with open_without_waiting(path) as file:
            raw = file.read(MAX_FILE_BYTES + 1)
        if len(raw) > MAX_FILE_BYTES:
            raise ValueError(f"it is larger than {MAX_FILE_BYTES:,} bytes, the limit for a scenario or sweep spec")
        return raw.decode("utf-8")
    except (OSError, ValueError) as exc:  # UnicodeDecodeError is a ValueError
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
        raise ScenarioError(str(path), [Problem("", None, f"cannot read the file: {reason}")]) from None


@checked
def load_scenario(path: str | Path) -> Scenario:
    """Read and validate a YAML (or JSON) scenario file."""
    return scenario_from_yaml(read_limited(path), str(path))


def parse_yaml(text: str, source: str) -> tuple[yaml.Node | None, Any]:
    """The checked node tree of YAML text (for line numbers) and the data it holds; a ScenarioError
    names the line of anything refused (see the module's docstring)."""
    if len(text) > MAX_FILE_BYTES:
        raise ScenarioError(source, [Problem("", None, f"larger than {MAX_FILE_BYTES:,} characters")])
    root = _compose(text, source)
    try:
        data = _LOADER(text).construct_document(root) if root is not None else None
    except (yaml.YAMLError, ValueError) as exc:  # a value the checks above let through and PyYAML cannot build
        raise ScenarioError(source, [Problem("", None, f"not valid YAML: {exc}")]) from None
    return root, data


@checked
def scenario_from_yaml(text: str, source: str = "<string>") -> Scenario:
    """Validate scenario YAML text; ``source`` names it in error messages."""
    root, data = parse_yaml(text, source)
    if not isinstance(data, dict):
        line = None if root is None else root.start_mark.line + 1
        raise ScenarioError(source, [Problem("", line, "expected a mapping with name, topics, members, events, ...")])
    try:
        return Scenario.model_validate(data)
    except ValidationError as exc:
        raise ScenarioError(source, _one_per_field([_problem(root, error) for error in exc.errors()])) from None


def _compose(text: str, source: str) -> yaml.Node | None:
    """Parse into PyYAML's node tree (which keeps line numbers), after the event pass; check the tree."""
    try:
        _check_events(text, source)
        root = yaml.compose(text, Loader=_LOADER)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = None if mark is None else mark.line + 1
        problem = " ".join(filter(None, [exc.context, exc.problem]))
        if exc.problem is not None and any(hint in exc.problem for hint in ("',' or '}'", "expected ':'")):
            problem += " (a key in {...} may be at most 1,024 characters long)"
        raise ScenarioError(source, [Problem("", line, f"not valid YAML: {problem}")]) from None
    except yaml.YAMLError as exc:
        raise ScenarioError(source, [Problem("", None, f"not valid YAML: {exc}")]) from None
    problems = list(_tree_problems(root, (), set())) if root is not None else []
    if problems:
        raise ScenarioError(source, problems)
    return root


def _check_events(text: str, source: str) -> None:
    """One pass over the parser's events: refuse tags, deep nesting, recursive aliases and alias bombs.

    Each anchor remembers the size (values) and height (levels) of what it names, so an alias
    costs what it would expand to without expanding it.
    """
    anchored: dict[str, tuple[int, int]] = {}  # anchor -> (size, height)
    open_: list[list[Any]] = []  # the collections being read: [anchor, size, height]

    def refuse(event: yaml.Event, message: str) -> None:
        raise ScenarioError(source, [Problem("", event.start_mark.line + 1, message)])

    def add(event: yaml.Event, size: int, height: int) -> None:
        if len(open_) + height > MAX_DEPTH:
            refuse(event, f"nested more than {MAX_DEPTH} levels deep (aliases expanded)")
        if open_:
            parent = open_[-1]
            parent[1] += size
            parent[2] = max(parent[2], height + 1)
            if parent[1] > MAX_NODES:
                refuse(event, f"more than {MAX_NODES:,} values, each alias counted as what it names (an alias bomb?)")

    for event in yaml.parse(text, Loader=_LOADER):
        if isinstance(event, yaml.NodeEvent) and getattr(event, "tag", None) is not None:
            tag = event.tag.replace("tag:yaml.org,2002:", "!!")
            refuse(event, f"tags such as {tag} are not allowed; write the plain value")
        if isinstance(event, yaml.AliasEvent):
            if any(entry[0] == event.anchor for entry in open_):
                refuse(event, f"the alias *{event.anchor} is inside the value it names (a recursive alias)")
            if event.anchor in anchored:
                add(event, *anchored[event.anchor])
        elif isinstance(event, yaml.ScalarEvent):
            add(event, 1, 1)
            if event.anchor is not None:
                anchored[event.anchor] = (1, 1)
        elif isinstance(event, yaml.CollectionStartEvent):
            if len(open_) >= MAX_DEPTH:
                refuse(event, f"nested more than {MAX_DEPTH} levels deep")
            open_.append([event.anchor, 1, 1])
        elif isinstance(event, yaml.CollectionEndEvent):
            anchor, size, height = open_.pop()
            add(event, size, height)
            if anchor is not None:
                anchored[anchor] = (size, height)


def _tree_problems(node: yaml.Node, loc: Loc, seen_nodes: set[int]):
    """Keys that are not plain values, duplicate keys, numbers out of range; each node once."""
    if id(node) in seen_nodes:  # an alias: checked where its anchor is
        return
    seen_nodes.add(id(node))
    line = node.start_mark.line + 1
    if isinstance(node, yaml.MappingNode):
        keys: set[str] = set()
        for key, value in node.value:
            if not isinstance(key, yaml.ScalarNode):
                yield Problem(_dotted(loc), key.start_mark.line + 1, "a key must be a plain value, not a list or map")
                continue
            if key.value in keys:
                yield Problem(_dotted((*loc, key.value)), key.start_mark.line + 1, "duplicate key")
            keys.add(key.value)
            yield from _tree_problems(value, (*loc, key.value), seen_nodes)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            yield from _tree_problems(item, (*loc, i), seen_nodes)
    elif node.tag in (_INT_TAG, _FLOAT_TAG, _BOOL_TAG):
        problem = _yaml_1_1_problem(node) or (_number_problem(node) if node.tag != _BOOL_TAG else None)
        if problem:
            yield Problem(_dotted(loc), line, problem)


def _yaml_1_1_problem(node: yaml.ScalarNode) -> str | None:
    """A plain value that YAML 1.1 and 1.2 read differently, refused with what to write instead."""
    text = node.value
    if node.style or (text.isdigit() and (text[0] != "0" or text == "0")) or text in ("true", "false"):
        return None  # quoted (text in both), or a plain decimal or boolean both read alike: the common case
    for pattern, meaning in _YAML_1_1_ONLY:
        if pattern.fullmatch(text):
            return f"{text} {meaning}; quote it if you mean text"
    return None


def _number_problem(node: yaml.ScalarNode) -> str | None:
    if len(node.value) > 40:
        return f"a number of {len(node.value):,} characters; numbers are longs (at most {LONG_MAX:,}) or floats"
    if node.tag == _INT_TAG:
        value = _NUMBERS.construct_yaml_int(node)
        if abs(value) > LONG_MAX:
            return f"{value} is out of range: integers are at most {LONG_MAX:,} in size"
        return None
    if not math.isfinite(_NUMBERS.construct_yaml_float(node)):
        return f"{node.value} is not a finite number"
    return None


def _problem(root: yaml.Node, error: ErrorDetails) -> Problem:
    loc: Loc = tuple(error["loc"])
    message = error["msg"]
    ctx = error.get("ctx") or {}
    if isinstance(ctx.get("error"), FieldError):
        loc, message = (*loc, *ctx["error"].loc), ctx["error"].message
    elif error["type"] == "extra_forbidden":
        message = _unknown_field(loc)
    elif error["type"] in ("union_tag_invalid", "union_tag_not_found"):
        field = ctx["discriminator"].strip("'")
        loc = (*loc, field)
        message = (
            f"unknown {field} {ctx['tag']!r}" if error["type"] == "union_tag_invalid" else f"missing {field}"
        ) + f"; expected one of: {ctx.get('expected_tags', '')}".rstrip(": ")
    else:
        message = message.removeprefix("Value error, ")
        if error["type"] not in ("missing", "value_error", "assertion_error"):
            message += f", got {_short(error['input'])}"
    path, line = _locate(root, loc)
    return Problem(path, line, message)


def _one_per_field(problems: list[Problem]) -> list[Problem]:
    """One line per field: a value that fits none of a union's kinds (a member state that is neither a
    consumer's nor a classic consumer's) gives one problem per kind; they are said on one line."""
    merged: dict[tuple[str, int | None], Problem] = {}
    for problem in problems:
        key = (problem.path, problem.line)
        if key in merged:
            merged[key] = Problem(problem.path, problem.line, f"{merged[key].message}; or {problem.message}")
        else:
            merged[key] = problem
    return list(merged.values())


def _locate(root: yaml.Node, loc: Loc) -> tuple[str, int]:
    """The dotted path and the line of ``loc`` in the YAML tree.

    A key that is absent (a missing field) is kept in the path and the line is its parent's;
    the union tags pydantic inserts (the event's action) are dropped, as they are not keys.
    """
    node, line, path = root, root.start_mark.line + 1, []
    for i, element in enumerate(loc):
        child = _child(node, element)
        if child is not None:
            key_line, node = child
            line = key_line
            path.append(element)
        elif isinstance(element, str) and (element == _scalar_value(node, "action") or "[" in element):
            continue
        else:
            path.extend(loc[i:])
            break
    return _dotted(tuple(path)), line


def _child(node: yaml.Node, element: str | int) -> tuple[int, yaml.Node] | None:
    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            if key.value == str(element):
                return key.start_mark.line + 1, value
    elif isinstance(node, yaml.SequenceNode) and isinstance(element, int) and 0 <= element < len(node.value):
        item = node.value[element]
        return item.start_mark.line + 1, item
    return None


def _scalar_value(node: yaml.Node, key: str) -> str | None:
    child = _child(node, key)
    return child[1].value if child is not None and isinstance(child[1], yaml.ScalarNode) else None


def _unknown_field(loc: Loc) -> str:
    """'unknown field' with the fields allowed there, and the closest one if it looks like a typo."""
    allowed = _fields_at(loc[:-1])
    if allowed is None:
        return "unknown field"
    guess = difflib.get_close_matches(str(loc[-1]), allowed, n=1)
    hint = f" (did you mean {guess[0]!r}?)" if guess else ""
    return f"unknown field{hint}; expected one of: {', '.join(allowed)}"


def _fields_at(loc: Loc) -> list[str] | None:
    """The field names of the model that sits at ``loc`` in a Scenario (None if not a model)."""
    kind: Any = Scenario
    for element in loc:
        kind = _unwrap(kind)
        if isinstance(kind, type) and issubclass(kind, BaseModel):
            field = kind.model_fields.get(str(element))
            if field is None:
                return None
            kind = field.annotation
        elif typing.get_origin(kind) in (dict, list):
            kind = typing.get_args(kind)[-1]
        elif typing.get_origin(kind) in (typing.Union, types.UnionType):
            tagged = [m for m in typing.get_args(kind) if _tag(m) == element]
            if not tagged:
                return None
            kind = tagged[0]
        else:
            return None
    kind = _unwrap(kind)
    if isinstance(kind, type) and issubclass(kind, BaseModel):
        return sorted(kind.model_fields)
    return None


def _unwrap(kind: Any) -> Any:
    """Drop ``Annotated[...]`` and ``| None`` around a type."""
    while True:
        if typing.get_origin(kind) is typing.Annotated:
            kind = typing.get_args(kind)[0]
            continue
        if typing.get_origin(kind) in (typing.Union, types.UnionType):
            members = [m for m in typing.get_args(kind) if m is not type(None)]
            if len(members) == 1:
                kind = members[0]
                continue
        return kind


def _tag(model: Any) -> str | None:
    field = model.model_fields.get("action") if isinstance(model, type) and issubclass(model, BaseModel) else None
    return None if field is None else field.default


def _dotted(loc: Loc) -> str:
    return ".".join(str(element) for element in loc)


_REPR = reprlib.Repr()
_REPR.maxlevel, _REPR.maxstring, _REPR.maxother, _REPR.maxlist, _REPR.maxdict = 2, 40, 40, 4, 4


def _short(value: Any, limit: int = 60) -> str:
    """A short repr that never builds the whole of a large value."""
    text = _REPR.repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
