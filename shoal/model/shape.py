"""What a document of a Krake kind shows: Krake's fields always, Shoal's own only when set.

Krake's clients read Shoal's documents as Krake's (its suite compares what it
reads with what it wrote; ``rok`` prints them). So a field Shoal adds to a
Krake kind is left out of the document while it holds its default (an empty
list, ``null``, ``false``, ``0``), and a polymorphic spec carries only ``type``
and the section ``type`` picks, never the other sections as ``null``. Reading
a document back fills what it leaves out with the same defaults, so nothing is
lost. Shoal's own kinds (leases, events, pods, reschedule tasks, scheduler
configurations) keep every field.

Models mark such fields with ``addition`` and ``section`` (pydantic's
``exclude_if``, evaluated as the model is written). The API's writes that edit
the stored JSON as a dict (bindings, status patches) end with ``prune``, which
leaves out the same fields by the same marks.
"""

from __future__ import annotations

import functools
import operator
import types
from collections.abc import Callable
from typing import Annotated, Any, Union, get_args, get_origin

from pydantic import BaseModel, Field


class AtDefault(functools.partial[bool]):
    """``exclude_if`` of an addition: whether a value is the field's default.

    A partial of ``operator.is_`` or ``operator.eq``, so that pydantic calls C, not
    Python, for each field of each document it writes; ``json`` is the default as
    stored JSON holds it, for ``prune``.
    """

    json: Any


def _at_default(default: Any) -> AtDefault:
    if isinstance(default, BaseModel):  # its fields, without pydantic's __eq__ (twice as slow)
        test = AtDefault(_same_fields, dict(default.__dict__))
        test.json = default.model_dump(mode="json")
        return test
    test = AtDefault(operator.is_ if default is None else operator.eq, default)
    test.json = default
    return test


def _same_fields(fields: dict[str, Any], value: Any) -> bool:
    return isinstance(value, BaseModel) and value.__dict__ == fields


def addition(
    default: Any = None, *, default_factory: Callable[[], Any] | None = None, **kwargs: Any
) -> Any:
    """A field Shoal adds to a Krake kind: in the document only when it differs from its
    default (``default``, or what ``default_factory`` makes)."""
    if default_factory is not None:
        return Field(
            default_factory=default_factory, exclude_if=_at_default(default_factory()), **kwargs
        )
    return Field(default=default, exclude_if=_at_default(default), **kwargs)


def section(**kwargs: Any) -> Any:
    """A section of a polymorphic spec: in the document only when ``type`` picks it."""
    return Field(default=None, exclude_if=_at_default(None), **kwargs)


def prune(model: type[BaseModel], data: dict[str, Any]) -> dict[str, Any]:
    """Leave out of ``data`` (stored JSON of ``model``, edited as a dict) the fields that
    the model's writes leave out at their defaults; ``data`` itself, changed in place."""
    for key, at_default, inner in _plan(model):
        if key not in data:
            continue
        value = data[key]
        if at_default is not None and value == at_default.json:
            del data[key]
        elif inner is not None and isinstance(value, dict):
            prune(inner, value)
    return data


@functools.cache
def _plan(model: type[BaseModel]) -> tuple[tuple[str, AtDefault | None, Any], ...]:
    """The fields of ``model`` that ``prune`` looks at: additions and sections, and the
    nested models holding some (``(key, its AtDefault or None, the nested model or None)``)."""
    steps = []
    for name, field in model.model_fields.items():
        at_default = field.exclude_if if isinstance(field.exclude_if, AtDefault) else None
        inner = nested_model(field.annotation)
        if inner is not None and not _plan(inner):
            inner = None
        if at_default is not None or inner is not None:
            steps.append((field.alias or name, at_default, inner))
    return tuple(steps)


def nested_model(annotation: Any) -> type[BaseModel] | None:
    """The model a field holds directly (``M`` or ``M | None``), or None."""
    while get_origin(annotation) is Annotated:
        annotation = get_args(annotation)[0]
    if get_origin(annotation) in (Union, types.UnionType):
        inner = [arg for arg in get_args(annotation) if arg is not type(None)]
        if len(inner) != 1:
            return None
        return nested_model(inner[0])
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    return None
