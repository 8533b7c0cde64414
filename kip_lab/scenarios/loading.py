"""Reading scenario files, and saying exactly what is wrong with a bad one.

A bad file raises ``ScenarioError``, never a traceback: one line per problem, in the style
``file.yaml:12: members.A.max_poll_interval_ms: Input should be greater than 0, got -5``,
so an editor can jump to it. Lines come from PyYAML's composed node tree, which keeps the
position of every key: a pydantic error location (a path of keys and indexes) is walked
down that tree to the key it names.
"""

from __future__ import annotations

import difflib
import types
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from kip_lab.scenarios.model import FieldError, Scenario

Loc = tuple[str | int, ...]


@dataclass(frozen=True)
class Problem:
    """One thing wrong with a scenario: where (field path and line) and what was expected."""

    path: str
    line: int | None
    message: str


class ScenarioError(Exception):
    """A scenario that cannot be read or is not valid; ``str()`` is the report for a person."""

    def __init__(self, source: str, problems: list[Problem]) -> None:
        self.source = source
        self.problems = problems
        super().__init__("\n".join(self._format(p) for p in problems))

    def _format(self, problem: Problem) -> str:
        where = self.source if problem.line is None else f"{self.source}:{problem.line}"
        return f"{where}: {problem.path}: {problem.message}" if problem.path else f"{where}: {problem.message}"


def load_scenario(path: str | Path) -> Scenario:
    """Read and validate a YAML (or JSON) scenario file."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ScenarioError(str(path), [Problem("", None, f"cannot read the file: {exc}")]) from None
    return scenario_from_yaml(text, str(path))


def scenario_from_yaml(text: str, source: str = "<string>") -> Scenario:
    """Validate scenario YAML text; ``source`` names it in error messages."""
    root = _compose(text, source)
    data = yaml.SafeLoader(text).construct_document(root) if root is not None else None
    if not isinstance(data, dict):
        line = None if root is None else root.start_mark.line + 1
        raise ScenarioError(source, [Problem("", line, "expected a mapping with name, topics, members, events, ...")])
    try:
        return Scenario.model_validate(data)
    except ValidationError as exc:
        raise ScenarioError(source, [_problem(root, error) for error in exc.errors()]) from None


def _compose(text: str, source: str) -> yaml.Node | None:
    """Parse into PyYAML's node tree (which keeps line numbers); refuse duplicate keys."""
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = None if mark is None else mark.line + 1
        problem = " ".join(filter(None, [exc.context, exc.problem]))
        raise ScenarioError(source, [Problem("", line, f"not valid YAML: {problem}")]) from None
    except yaml.YAMLError as exc:
        raise ScenarioError(source, [Problem("", None, f"not valid YAML: {exc}")]) from None
    duplicates = list(_duplicate_keys(root, ())) if root is not None else []
    if duplicates:
        raise ScenarioError(source, duplicates)
    return root


def _duplicate_keys(node: yaml.Node, loc: Loc):
    if isinstance(node, yaml.MappingNode):
        seen: set[str] = set()
        for key, value in node.value:
            if key.value in seen:
                yield Problem(_dotted((*loc, key.value)), key.start_mark.line + 1, "duplicate key")
            seen.add(key.value)
            yield from _duplicate_keys(value, (*loc, key.value))
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            yield from _duplicate_keys(item, (*loc, i))


def _problem(root: yaml.Node, error: dict[str, Any]) -> Problem:
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


def _short(value: Any, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
