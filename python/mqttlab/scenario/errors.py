"""Scenario problems as one listing: each line names the field path and what is allowed."""

from __future__ import annotations

import typing
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, Iterable

from pydantic import BaseModel, ValidationError

from mqttlab.spelling import did_you_mean


@dataclass(frozen=True)
class Problem:
    path: str  # dotted field path, e.g. "publishers.qos"; "" for the whole file
    message: str
    # The fields a cross-field rule read; such a problem is withheld when one of them is
    # itself invalid, since the rule then judged a default the user never wrote.
    involves: tuple[str, ...] = field(default=(), compare=False)

    def depends_on(self, invalid_paths: Iterable[str]) -> bool:
        return any(_overlaps(mine, bad) for mine in (self.path, *self.involves) for bad in invalid_paths)

    def __str__(self) -> str:
        return f"{self.path}: {self.message}" if self.path else self.message


class ScenarioError(Exception):
    """Every problem found in a scenario, reported together."""

    def __init__(self, problems: Iterable[Problem], source: str = "scenario") -> None:
        self.problems = list(problems)
        self.source = source
        super().__init__(self.listing())

    def listing(self) -> str:
        count = len(self.problems)
        header = f"{self.source}: {count} problem{'s' if count != 1 else ''}"
        return "\n".join([header] + [f"  {problem}" for problem in self.problems])


def _overlaps(a: str, b: str) -> bool:
    """True when one dotted path is the other or contains it ("tls" and "tls.ca")."""
    return a == b or a.startswith(b + ".") or b.startswith(a + ".") or a.startswith(b + "[")


def problems_from_validation(error: ValidationError, model: type[BaseModel]) -> list[Problem]:
    return [_problem(detail, model) for detail in error.errors(include_url=False)]


def _problem(detail: Any, model: type[BaseModel]) -> Problem:
    loc = _visible_location(detail["loc"])
    kind, ctx, got = detail["type"], detail.get("ctx") or {}, detail.get("input")
    if kind == "extra_forbidden":
        return Problem(_dotted(loc), _unknown_key_message(model, loc))
    return Problem(_dotted(loc), _message(kind, ctx, got, detail["msg"]))


def _visible_location(loc: tuple[Any, ...]) -> tuple[Any, ...]:
    # A discriminated union puts its tag ("uniform") in the location; the user never wrote it.
    from mqttlab.scenario.model import PAYLOAD_KINDS

    visible: list[Any] = []
    for part in loc:
        if visible and visible[-1] == "payload" and part in PAYLOAD_KINDS:
            continue
        visible.append(part)
    return tuple(visible)


def _dotted(loc: tuple[Any, ...]) -> str:
    text = ""
    for part in loc:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text


# pydantic's error types in mqttlab's words, filled from the error's context (`ctx`, whose keys
# pydantic names per type) and `shown`, the value the user gave.
MESSAGES = {
    "missing": "is required",
    "literal_error": "must be {expected}{shown}",
    **dict.fromkeys(("int_type", "int_parsing", "int_from_float"), "must be a whole number{shown}"),
    **dict.fromkeys(("float_type", "float_parsing", "finite_number"), "must be a number{shown}"),
    **dict.fromkeys(("bool_type", "bool_parsing"), "must be true or false{shown}"),
    "string_type": "must be a string{shown}",
    **dict.fromkeys(("model_type", "model_attributes_type", "dict_type"), "must be a mapping of keys to values{shown}"),
    "list_type": "must be a list{shown}",
    "greater_than": "must be greater than {gt}{shown}",
    "greater_than_equal": "must be {ge} or more{shown}",
    "less_than": "must be less than {lt}{shown}",
    "less_than_equal": "must be {le} or less{shown}",
    "too_short": "needs at least {min_length} item(s)",
    "string_too_long": "must be at most {max_length} characters",
    "union_tag_invalid": "dist must be one of {expected_tags} (got {tag!r})",
    "union_tag_not_found": "a distribution needs `dist:` (fixed, uniform, normal or exponential)",
}


def _message(kind: str, ctx: dict[str, Any], got: Any, default: str) -> str:
    shown = f" (got {got!r})"
    if kind == "string_pattern_mismatch":
        # One error type for every pattern: which field's it was is told by the pattern.
        pattern = str(ctx.get("pattern", ""))
        if "," in pattern and "0-9" in pattern and ":" not in pattern:
            return f"must be a CPU list as taskset -c takes it, such as 1, 0,2 or 2-3{shown}"
        if ":" in pattern:
            return f"must be HOST:PORT, such as 127.0.0.1:9464 or :9464{shown}"
        return f"may hold only letters, digits, '.', '_' and '-', starting with a letter or digit{shown}"
    template = MESSAGES.get(kind)  # "mqttlab" (our own validators' errors) and the rest: pydantic's own words
    # A context without the key a template names leaves that part empty rather than failing.
    return template.format_map(defaultdict(str, ctx, shown=shown)) if template is not None else default


def _unknown_key_message(model: type[BaseModel], loc: tuple[Any, ...]) -> str:
    key = str(loc[-1])
    known = _known_keys(model, loc[:-1])
    close = did_you_mean(key, known)
    if close:
        return f"unknown key (did you mean {close!r}?)"
    return f"unknown key (allowed: {', '.join(known)})" if known else "unknown key"


def _known_keys(model: type[BaseModel], loc: tuple[Any, ...]) -> list[str]:
    """The field names of the section at `loc`, found by walking the model's annotations."""
    current: Any = model
    for part in loc:
        if isinstance(part, int):
            continue
        field = getattr(current, "model_fields", {}).get(part)
        if field is None:
            return []
        current = _section_type(field.annotation, part)
        if current is None:
            return []
    return list(current.model_fields) if hasattr(current, "model_fields") else []


def _section_type(annotation: Any, key: Any) -> Any:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    # The payload is a union of models: offer the keys of all of them.
    members = [arg for arg in typing.get_args(annotation) if isinstance(arg, type) and issubclass(arg, BaseModel)]
    if not members:
        for arg in typing.get_args(annotation):
            found = _section_type(arg, key)
            if found is not None:
                return found
        return None
    if len(members) == 1:
        # An optional section (Optional[Model]): walk on into it, so keys nested below it
        # (network.up.delay) get suggestions too.
        return members[0]
    return _KeysOf(list(dict.fromkeys(name for member in members for name in member.model_fields)))


class _KeysOf:
    def __init__(self, names: list[str]) -> None:
        self.model_fields = {name: None for name in names}
