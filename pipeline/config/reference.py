"""What the config's field declarations say, for people: `hftfx run`'s flags with their help, and
docs/config.md (`python -m pipeline.config.reference > docs/config.md`; a test keeps the file current).

Nothing here is written twice: a flag, its key, its help, its type and its default come from the field.
"""

from __future__ import annotations

import dataclasses
import json
import types
import typing
from collections.abc import Iterator
from typing import Any, Literal

import pydantic
from pydantic.fields import FieldInfo
from pydantic_core import to_jsonable_python

from models.config_section import allowed_range, is_section
from pipeline.config.pipeline_config import PipelineConfig


@dataclasses.dataclass(frozen=True)
class Setting:
    key: str  # dotted: training.epochs
    field: FieldInfo
    default: Any

    @property
    def flags(self) -> dict[str, str]:
        """flag -> sub-key ('' for the field itself)."""
        extra = self.field.json_schema_extra
        return dict(extra.get("flags", {})) if isinstance(extra, dict) else {}

    @property
    def is_list(self) -> bool:
        return typing.get_origin(_bare(self.field.annotation)) is tuple


@dataclasses.dataclass(frozen=True)
class RunFlag:
    flag: str  # --epochs
    key: str  # training.epochs, or dataset.limits.train
    help: str
    is_list: bool  # comma-separated on the command line
    metavar: str  # what the value is: N, X, TEXT, {auto,bf16,fp32}, TEXT,...


def settings(model: type[pydantic.BaseModel] = PipelineConfig, prefix: str = "") -> Iterator[Setting]:
    """Every leaf setting, in declaration order, sections expanded."""
    for name, field in model.model_fields.items():
        key = f"{prefix}{name}"
        if is_section(field.annotation):
            yield from settings(field.annotation, f"{key}.")
        else:
            yield Setting(key, field, field.get_default(call_default_factory=True))


def run_flags() -> list[RunFlag]:
    """`hftfx run`'s flags: the fields that declare one; every other key takes --set KEY=VALUE."""
    flags = []
    for setting in settings():
        for name, sub_key in setting.flags.items():
            text = setting.field.description or ""
            key = f"{setting.key}.{sub_key}" if sub_key else setting.key
            flags.append(RunFlag(name, key, text, setting.is_list, _metavar(setting.field.annotation, sub_key)))
    return flags


def _metavar(annotation: Any, sub_key: str) -> str:
    bare = _bare(annotation)
    origin, args = typing.get_origin(bare), typing.get_args(bare)
    if origin is Literal:
        return "{" + ",".join(str(a) for a in args) + "}"
    if origin is tuple:
        return _metavar(args[0], "") + ",..."
    if origin is dict and sub_key:
        return _metavar(args[1], "")
    if origin in (types.UnionType, typing.Union):  # N|auto
        return "|".join(_metavar(a, sub_key).strip("{}") for a in args if a is not type(None))
    return {int: "N", float: "X"}.get(bare, "TEXT")


def type_name(annotation: Any) -> str:
    """The type as a config author writes it: `auto | bf16 | fp32`, `list of int`, `number or null`."""
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is typing.Annotated:
        return type_name(args[0])
    if origin is Literal:
        return " | ".join(str(a) for a in args)
    if origin in (types.UnionType, typing.Union):
        inner = [type_name(a) for a in args if a is not type(None)]
        return " or ".join(inner) + (" or null" if type(None) in args else "")
    if origin in (tuple, list):
        return f"list of {type_name(args[0])}" if args and args[0] is not Any else "list"
    if origin is dict:
        return f"mapping of {type_name(args[0])} to {type_name(args[1])}"
    if isinstance(annotation, type) and issubclass(annotation, pydantic.BaseModel):  # a small value object
        return "{" + ", ".join(annotation.model_fields) + "}"
    return {str: "text", int: "integer", float: "number", bool: "true / false"}.get(annotation, str(annotation))


def _bare(annotation: Any) -> Any:
    while typing.get_origin(annotation) is typing.Annotated:
        annotation = typing.get_args(annotation)[0]
    return annotation


def _shown(value: Any) -> str:
    if isinstance(value, tuple):
        value = list(value)
    return f"`{json.dumps(value, default=to_jsonable_python)}`"  # pydantic's own JSON of a section's values


def markdown() -> str:
    """docs/config.md: one table per section, from the fields' declarations."""
    lines = [
        "# Config reference",
        "",
        "Generated from the field declarations (`python -m pipeline.config.reference > docs/config.md`).",
        "Set any key in a YAML file (`--config run.yaml`) or with `--set key=value` (lists and mappings in YAML",
        "flow style: `--set training.batch_widths=[32,48]`); the flags of `hftfx run` are listed per key.",
    ]
    section = None
    for setting in settings():
        head = setting.key.rsplit(".", 1)[0] if "." in setting.key else "top level"
        if head != section:
            section = head
            about = _section_doc(head)
            lines += ["", f"## {head}", "", *([about, ""] if about else []), "| key | type | default | flag | what |"]
            lines.append("|---|---|---|---|---|")
        flags = ", ".join(f"`{name}`" for name in setting.flags)
        what = (setting.field.description or "").replace("|", "\\|").replace("<", "&lt;")
        kind = type_name(setting.field.annotation).replace("|", "\\|") + (
            f" ({bounds})" if (bounds := allowed_range(setting.field)) else ""
        )
        lines.append(f"| `{setting.key}` | {kind} | {_shown(setting.default)} | {flags} | {what} |")
    return "\n".join(lines) + "\n"


def _section_doc(dotted: str) -> str:
    model: type[pydantic.BaseModel] = PipelineConfig
    if dotted != "top level":
        for part in dotted.split("."):
            model = model.model_fields[part].annotation
    return " ".join((model.__doc__ or "").split("\n\n")[0].split())


if __name__ == "__main__":
    print(markdown(), end="")
