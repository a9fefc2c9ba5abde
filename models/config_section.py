"""The base of every config section: a frozen pydantic model whose fields each carry one description.

Those descriptions are the config's documentation: `hftfx run --help`, docs/config.md and the error messages
are generated from them. Validation (types, ranges, choices) is pydantic's; this module only turns its errors
into the lines a user reads: the dotted key, the value given, what it should be and what the key is for.
"""

from __future__ import annotations

import math
import typing
from collections.abc import Mapping
from typing import Annotated, Any

import pydantic
from pydantic import AfterValidator, BeforeValidator, ConfigDict
from pydantic.fields import FieldInfo

from models.errors import UserError


class ConfigError(UserError, ValueError):
    """A configuration value is wrong; the message names the key and the fix."""


class ConfigSection(pydantic.BaseModel):
    """A group of settings read by one part of the pipeline; unknown keys are refused, instances are frozen.
    Numbers are taken where text is expected: YAML reads `revision: 2024` or `{header: 0}` as numbers."""

    model_config = ConfigDict(frozen=True, extra="forbid", coerce_numbers_to_str=True)
    RENAMED: typing.ClassVar[dict[str, str]] = {}  # old key -> its new name: a config of an older release is told

    @pydantic.model_validator(mode="before")
    @classmethod
    def _renamed_keys_name_their_new_name(cls, values: Any) -> Any:
        if isinstance(values, Mapping):
            for old in sorted(set(cls.RENAMED) & set(values)):
                raise ValueError(f"'{old}' was renamed '{cls.RENAMED[old]}': set {cls.RENAMED[old]} instead")
        return values


def flag(name: str) -> dict[str, dict[str, str]]:
    """A field's `hftfx run` flag (`Field(..., json_schema_extra=flag("--epochs"))`); other fields take --set."""
    return {"flags": {name: ""}}


def per_key_flags(**flags_by_key: str) -> dict[str, dict[str, str]]:
    """Flags for keys of a mapping field: `per_key_flags(train="--train-limit")` sets `<field>.train`."""
    return {"flags": {name: key for key, name in flags_by_key.items()}}


AUTO = "auto"  # a setting the run chooses from the data or the model (said at --check, the reason with it)


def auto_or_number(value: Any, *, kind: type = int, low: float, high: float = math.inf, what: str) -> Any:
    """`auto`, or a number of `kind` in [low, high) (as text too: --set passes strings); else one message that
    names both forms, rather than one per alternative of a union."""
    if value == AUTO:
        return value
    try:
        number = kind(str(value))
    except ValueError:
        raise ValueError(f"should be auto or {what}") from None
    if not low <= number < high:
        raise ValueError(f"should be auto or {what}")
    return number


def _one_or_many(value: Any) -> Any:
    """A lone value where a list is expected (`--set dataset.data_files=a.csv`) is a list of one."""
    return [value] if isinstance(value, str | int | float) else value


Texts = Annotated[tuple[str, ...], BeforeValidator(_one_or_many)]


def increasing_ints(minimum: int) -> Any:
    """A list of increasing integers, none under `minimum` (token widths, bucket edges)."""

    def check(values: tuple[int, ...]) -> tuple[int, ...]:
        if list(values) != sorted(set(values)) or any(value < minimum for value in values):
            raise ValueError(f"should be increasing numbers of at least {minimum}")
        return values

    return Annotated[tuple[int, ...], BeforeValidator(_one_or_many), AfterValidator(check)]


def build_section(cls: type[ConfigSection], values: Mapping[str, Any], key: str = "") -> Any:
    """`cls` from plain values (YAML, JSON, flags); every problem named by its dotted key in one ConfigError."""
    try:
        return cls.model_validate(dict(values))
    except pydantic.ValidationError as error:
        raise ConfigError("invalid configuration:\n  - " + "\n  - ".join(problem_lines(error, cls, key))) from None


def problem_lines(error: pydantic.ValidationError, cls: type[pydantic.BaseModel], key: str = "") -> list[str]:
    """One line per problem: `training.epochs = 0: should be at least 1 (passes over the train split)`."""
    return [_problem_line(detail, cls, key) for detail in error.errors(include_url=False)]


def _problem_line(detail: Mapping[str, Any], cls: type[pydantic.BaseModel], key: str) -> str:
    path, field, section = _dotted(detail["loc"], cls, key)
    message = _message(detail)
    if detail["type"] == "extra_forbidden":
        owner = path.rsplit(".", 1)[0] if "." in path else ""
        known = sorted(section.model_fields)
        return f"unknown config key '{path}'; known {'in ' + repr(owner) if owner else 'at the top level'}: {known}"
    if detail["type"] == "value_error" and (field is None or is_section(field.annotation)):
        return message  # a rule across a section's fields: its message names them
    shown = f"{path} = {detail['input']!r}" if detail["type"] != "missing" else path
    about = [field.description] if field is not None and field.description else []
    bounds = allowed_range(field) if field is not None and detail["type"] in _COMPARISONS else ""
    if ", " in bounds:  # a range: the message names the side crossed, this both
        about.insert(0, f"allowed: {bounds}")
    return f"{shown}: {message}" + (f" ({'; '.join(about)})" if about else "")


def allowed_range(field: FieldInfo) -> str:
    """A field's bounds as people write them (`>= 0, <= 1`), from its own and its type's constraints."""
    words = {"ge": ">=", "gt": ">", "le": "<=", "lt": "<", "min_length": "length >="}
    found = []
    for item in [*field.metadata, *_annotated_metadata(field.annotation)]:
        for attribute, word in words.items():
            if getattr(item, attribute, None) is not None:
                found.append(f"{word} {getattr(item, attribute)}")
    return ", ".join(found)


def _annotated_metadata(annotation: Any) -> list[Any]:
    """Constraints inside the type (`Annotated[float, Field(ge=0)] | None`, dict values), where they are."""
    if typing.get_origin(annotation) is Annotated:
        inner, *metadata = typing.get_args(annotation)
        found = [m for item in metadata for m in (item.metadata if isinstance(item, FieldInfo) else [item])]
        return found + _annotated_metadata(inner)
    return [m for arg in typing.get_args(annotation) for m in _annotated_metadata(arg)]


_COMPARISONS = ("greater_than", "greater_than_equal", "less_than", "less_than_equal")


def _message(detail: Mapping[str, Any]) -> str:
    text = str(detail["msg"]).removeprefix("Value error, ").removeprefix("Assertion failed, ")
    replacements = {
        "Input should be greater than or equal to": "should be at least",
        "Input should be less than or equal to": "should be at most",
        "Input should be greater than": "should be more than",
        "Input should be less than": "should be less than",
        "Input should be": "should be",
    }
    for pydantic_words, ours in replacements.items():
        if text.startswith(pydantic_words):
            return ours + text[len(pydantic_words) :]
    return text


def _dotted(loc: tuple, cls: type[pydantic.BaseModel], key: str) -> tuple[str, Any, type[pydantic.BaseModel]]:
    """('training', 'batch_widths', 0) -> 'training.batch_widths[0]', the field it falls in and the innermost
    section on the way (the one an unknown key was given to)."""
    path, field, model, section = key, None, cls, cls
    for part in loc:
        if isinstance(part, int):
            path += f"[{part}]"
            continue
        if part == "[key]":  # the key itself is wrong: name the mapping, the input is the key
            path = path.rsplit(".", 1)[0] + " key"
            continue
        path = f"{path}.{part}" if path else str(part)
        fields = model.model_fields if model is not None else {}
        if part in fields:
            field = fields[part]
            model = field.annotation if is_section(field.annotation) else None
            section = model or section
    return path, field, section


def is_section(annotation: Any) -> bool:
    """A field whose type is a section of its own (training.early_stopping), not a value."""
    return isinstance(annotation, type) and issubclass(annotation, pydantic.BaseModel)
