"""Outputs of the task's own types, carried across the worker's pipe as plain data.

A reference may return a `torch.return_types` value (`torch.linalg.qr`), a NamedTuple or a
dataclass of the task's modules; the check expects the same type back. The worker writes such
a value as a tagged dict of plain data (`encode`), and the harness builds it again (`rebuild`)
from types it has itself imported: `torch.return_types`, or a module of the task's run
directory other than the submission. The worker is the submission's process, so a tag names a
type only; it never brings code, and the leaves stay what `tensors.not_plain` allows.
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from cluster_manager.harness.tensors import fold, plain_type, same_type

TYPE_KEY = "\x00type"  # no dict a task returns has this key
_TORCH_TYPES = "torch.return_types"
_SUBMISSION = "submission"


def _type_name(kind: type) -> str:
    return f"{kind.__module__}:{kind.__qualname__}"


def _encode_leaf(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields = {f.name: encode(getattr(value, f.name)) for f in dataclasses.fields(value)}
        return {TYPE_KEY: _type_name(type(value)), "fields": fields}
    return value


def _encode_node(container: Any, results: Iterator[Any]) -> Any:
    kind = type(container)
    if kind in (list, tuple, dict):
        return plain_type(container, results)
    if isinstance(container, tuple):
        return {TYPE_KEY: _type_name(kind), "items": list(results)}
    # A list or dict subclass stays itself, unread: `not_plain` refuses it (its reads could
    # run code of the submission's, after the timer stopped).
    return container


def encode(output: Any) -> Any:
    """`output` with its tuple subclasses and dataclasses as tagged dicts of plain data."""
    return fold(output, _encode_leaf, _encode_node)


def _allowed(module_name: str) -> bool:
    """torch's result types, or a module the harness imported from the run directory (the
    reference's own imports); never the submission, which only its worker may import."""
    if module_name == _TORCH_TYPES:
        return True
    module = sys.modules.get(module_name)
    file = getattr(module, "__file__", None)
    if module_name == _SUBMISSION or file is None:
        return False
    return Path(file).resolve().is_relative_to(Path.cwd().resolve())


def _resolve(name: object) -> type:
    module_name, _, qualname = str(name).partition(":")
    if not _allowed(module_name):
        raise ValueError(f"the output's type {name} is not one of torch's or the task's own")
    found: Any = sys.modules[module_name]
    for part in qualname.split("."):
        found = getattr(found, part, None)
    # Only a class the module defines: not one it imported (`reference:subprocess.Popen`).
    if not isinstance(found, type) or found.__module__ != module_name:
        raise ValueError(f"the output's type {name} is not a class of its module")
    return found


def _build(kind: type, tagged: dict[str, Any]) -> Any:
    try:
        if "fields" in tagged and dataclasses.is_dataclass(kind):
            return kind(**tagged["fields"])
        if "items" in tagged and issubclass(kind, tuple):
            items = tagged["items"]
            return kind(*items) if hasattr(kind, "_fields") else kind(items)  # NamedTuple or not
    except TypeError as exc:  # fields or items that do not fit the type
        raise ValueError(f"the output's {_type_name(kind)} cannot be built: {exc}") from None
    raise ValueError(f"the output's type {_type_name(kind)} is not a tuple type or dataclass")


def _rebuild_node(container: Any, results: Iterator[Any]) -> Any:
    rebuilt = same_type(container, results)
    if isinstance(rebuilt, dict) and TYPE_KEY in rebuilt:
        return _build(_resolve(rebuilt[TYPE_KEY]), rebuilt)
    return rebuilt


def rebuild(output: Any) -> Any:
    """The output as the task's check expects it: each tagged dict built into its type.
    Raises ValueError naming a type that cannot be built here."""
    return fold(output, lambda value: value, _rebuild_node)
