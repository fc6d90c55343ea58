"""Dataclass and pydantic model instances as states and patches, and states read back as them.

**Writing** (:func:`model_fields`, which the encoder calls for a value that is no type of its
own): a model instance stands for a JSON object of its fields.

* As a *replacement* (``replace_state``, the initial state) and anywhere *inside* a value: all
  its fields (a dataclass's ``fields()`` in order, with nested values encoded as values are; a
  pydantic model's ``model_dump()``).
* As a *patch* (``set_state``, ``set_state_if``), at its top: the fields it sets. For a pydantic
  model, those set explicitly (``model_dump(exclude_unset=True)``: given to the constructor or
  assigned since, at every level, as pydantic counts them). A dataclass records no such thing:
  its fields whose value differs from the field's default (``default``, or a fresh
  ``default_factory()``), and those without a default. So a field left at its default is not
  written, and neither is one set back to it: to write a default value, patch with a dict.

Pydantic is optional: it is never imported here. A pydantic model instance exists only once its
``pydantic.main`` (or ``pydantic.v1.main``) module is loaded, so that is what is looked up in
``sys.modules``.

**Reading** (:func:`build`, for ``get_state_as``): a pydantic model class validates the state
(``model_validate``; ``parse_obj`` for v1), which converts what the codec maps to JSON back
(UUIDs, enums, decimals, paths, nested models). A dataclass is built from the state's members
of its ``__init__`` fields (others are ignored), converting each by the field's type: nested
dataclasses, ``Enum``, ``UUID``, ``Decimal`` (from the number's exact text), ``pathlib``
paths, ``Optional`` of those, and lists, tuples and ``str``-keyed dicts of those; anything else
is passed as read.
"""

from __future__ import annotations

import dataclasses
import enum
import sys
import types
import typing
import uuid
from decimal import Decimal
from pathlib import PurePath
from typing import Any, Dict, Mapping, Optional, Type, TypeVar

from .values import JSONFloat, JSONInt

M = TypeVar("M")

#: ``X | None`` (Python 3.10+) is a ``types.UnionType``, not a ``typing.Union``.
_UNION_TYPE: Any = getattr(types, "UnionType", None)


def _pydantic_base(value: Any) -> Optional[type]:
    """The pydantic ``BaseModel`` (v2's or v1's) that ``value`` is an instance of, if any."""
    for name in ("pydantic.main", "pydantic.v1.main"):
        module = sys.modules.get(name)
        base = getattr(module, "BaseModel", None) if module is not None else None
        if base is not None and isinstance(value, base):
            return base  # type: ignore[no-any-return]
    return None


def model_fields(value: Any, patch: bool) -> Optional[Dict[str, Any]]:
    """The members ``value`` stands for, if it is a model instance (see the module
    documentation); None otherwise. Dataclass members are not converted further: nested models
    are the encoder's to write (as whole objects), so a cycle is caught there."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        members: Dict[str, Any] = {}
        for field in dataclasses.fields(value):
            member = getattr(value, field.name)
            if patch and _is_default(field, member):
                continue
            members[field.name] = member
        return members
    if _pydantic_base(value) is not None:
        dump = getattr(value, "model_dump", None)
        if dump is None:  # pydantic v1
            dumped: Dict[str, Any] = value.dict(exclude_unset=patch)
        else:
            dumped = dump(exclude_unset=patch)
        return dumped
    return None


def _is_default(field: "dataclasses.Field[Any]", member: Any) -> bool:
    if field.default is not dataclasses.MISSING:
        default = field.default
    elif field.default_factory is not dataclasses.MISSING:
        default = field.default_factory()
    else:
        return False
    try:
        return bool(member == default) and type(member) is type(default)
    except Exception:  # an __eq__ that raises: write the member
        return False


def build(model: Type[M], state: Mapping[str, Any]) -> M:
    """``state`` (as ``get_state()`` reads it) as an instance of ``model``, a dataclass or a
    pydantic model class (see the module documentation)."""
    if isinstance(model, type):
        validate = getattr(model, "model_validate", None)
        if validate is not None and _is_pydantic_class(model):
            built: M = validate(state)
            return built
        if _is_pydantic_class(model):  # pydantic v1
            built = getattr(model, "parse_obj")(state)
            return built
        if dataclasses.is_dataclass(model):
            built = _dataclass(model, state)
            return built
    raise TypeError(f"get_state_as takes a dataclass or a pydantic model class, not {model!r}")


def _is_pydantic_class(cls: type) -> bool:
    for name in ("pydantic.main", "pydantic.v1.main"):
        module = sys.modules.get(name)
        base = getattr(module, "BaseModel", None) if module is not None else None
        if base is not None and issubclass(cls, base):
            return True
    return False


def _dataclass(cls: Any, state: Mapping[str, Any]) -> Any:
    if not isinstance(state, Mapping):
        raise TypeError(f"{cls.__name__} is built from a JSON object, not {type(state).__name__}")
    try:
        hints = typing.get_type_hints(cls)
    except Exception:  # annotations that do not resolve (a local class): no conversion
        hints = {}
    arguments = {}
    for field in dataclasses.fields(cls):
        if field.init and field.name in state:
            arguments[field.name] = _convert(hints.get(field.name, Any), state[field.name])
    return cls(**arguments)


def _convert(hint: Any, value: Any) -> Any:
    """``value``, as read from the store, as the type ``hint`` names, where the codec's mapping
    lost it (see the module documentation); as it is otherwise."""
    if value is None or hint is Any:
        return value
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin is typing.Union or (_UNION_TYPE is not None and origin is _UNION_TYPE):
        options = [a for a in args if a is not type(None)]
        return _convert(options[0], value) if len(options) == 1 else value
    if origin in (list, typing.List) and args and isinstance(value, list):
        return [_convert(args[0], v) for v in value]
    if origin in (tuple, typing.Tuple) and args and isinstance(value, (list, tuple)):
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(_convert(args[0], v) for v in value)
        if len(args) == len(value):
            return tuple(_convert(a, v) for a, v in zip(args, value))
        return tuple(value)
    if origin in (dict, typing.Dict) and len(args) == 2 and isinstance(value, dict):
        return {k: _convert(args[1], v) for k, v in value.items()}
    if not isinstance(hint, type):
        return value
    if dataclasses.is_dataclass(hint) and isinstance(value, Mapping):
        return _dataclass(hint, value)
    if issubclass(hint, enum.Enum):
        return hint(value)
    if issubclass(hint, uuid.UUID) and isinstance(value, str):
        return hint(value)
    if issubclass(hint, Decimal) and isinstance(value, (int, float)) and not isinstance(value, bool):
        if isinstance(value, (JSONFloat, JSONInt)):
            return hint(value.json)  # the number's exact digits
        return hint(repr(value) if isinstance(value, float) else int(value))
    if issubclass(hint, PurePath) and isinstance(value, str):
        return hint(value)
    if issubclass(hint, tuple) and isinstance(value, list):
        return tuple(value)
    if _is_pydantic_class(hint) and isinstance(value, Mapping):
        return build(hint, value)
    return value

