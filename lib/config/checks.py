"""Values checked against their annotations by pydantic, refused as :class:`ParamsError` naming the
file and the key.

pydantic's strict mode: an int is neither a bool nor ``"3"``, a str is not a number; a float takes an
int. A ``list[...]`` or ``tuple[...]`` field takes a list or a tuple alike (YAML gives lists, Python
code often tuples), each item checked. A settings class (a stage config, a task's options, the
cluster block) is checked as a whole, any subset of its fields: an unknown key is refused with the
closest field suggested. The first error is reported, worded as the messages have always been:
``WHERE must be int, got str 'two'``, ``WHERE[1] must be str``, ``WHERE key 1 must be str``.
"""

from __future__ import annotations

import functools
import operator
import types
import typing
from dataclasses import fields
from typing import Annotated

from pydantic import BeforeValidator, ConfigDict, TypeAdapter, ValidationError, create_model

from lib.config.errors import ParamsError, did_you_mean, short

STRICT = ConfigDict(strict=True, extra="forbid")
_UNIONS = (typing.Union, types.UnionType)


@functools.cache
def field_types(cls) -> dict:
    """A settings dataclass's field annotations, resolved once (every config made checks them)."""
    hints = typing.get_type_hints(cls)
    return {f.name: hints[f.name] for f in fields(cls)}


def check_type(value, tp, where: str) -> None:
    """Raise :class:`ParamsError` unless ``value`` fits the annotation ``tp`` (``where`` names it)."""
    try:
        _adapter(tp).validate_python(value)
    except ValidationError as e:
        raise ParamsError(_refusal(e.errors()[0]["loc"], tp, value, where)) from None


def check_fields(cls, values: dict, where: str, params: bool = False) -> None:
    """``values`` (any subset of the fields of settings dataclass ``cls``) against their annotations.
    ``params``: worded for a stage's params (``FILE: parameter 'k' must be ...``, ``FILE: unknown
    parameter(s) ['k'] for Cls``), else for a settings block (``WHERE.k must be ...``, ``WHERE:
    unknown key 'k'``)."""
    try:
        _fields_adapter(cls).validate_python(values)
        return
    except ValidationError as e:
        errors = e.errors()
    names = list(field_types(cls))
    unknown = [e["loc"][0] for e in errors if e["type"] in ("extra_forbidden", "invalid_key")]
    unknown.sort(key=str)
    if unknown and params:
        raise ParamsError(
            f"{where}: unknown parameter(s) {unknown} for {cls.__name__}"
            f"{did_you_mean(unknown[0], names)} (known: {', '.join(sorted(names))})"
        )
    if unknown:
        raise ParamsError(
            f"{where}: unknown key {unknown[0]!r}{did_you_mean(unknown[0], names)} "
            f"(keys: {', '.join(names)})"
        )
    order = list(values)  # the first key at fault as the file lists them
    key, *loc = min((e["loc"] for e in errors), key=lambda loc: order.index(loc[0]))
    at = f"{where}: parameter {key!r}" if params else f"{where}.{key}"
    raise ParamsError(_refusal(loc, field_types(cls)[key], values[key], at))


def dataclass_from(cls, values: dict, where: str):
    """``cls(**values)`` for a settings dataclass, with unknown keys (with a "did you mean") and
    wrong types raised as :class:`ParamsError` naming ``where`` and the key."""
    if not isinstance(values, dict):
        raise ParamsError(
            f"{where} must be a mapping of {cls.__name__} fields, got {short(values)}"
        )
    check_fields(cls, values, where)
    return cls(**values)


def _as_list(value):
    return list(value) if isinstance(value, tuple) else value


def _lenient(tp):
    """``tp`` as pydantic checks it: ``list[X]`` and ``tuple[X, ...]`` take a list or a tuple."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (list, tuple):
        return Annotated[list[_lenient(args[0]) if args else typing.Any], BeforeValidator(_as_list)]
    if origin is dict and args:
        return dict[_lenient(args[0]), _lenient(args[1])]
    if origin in _UNIONS:
        return functools.reduce(operator.or_, map(_lenient, args))
    return tp


@functools.cache
def _adapter(tp) -> TypeAdapter:
    return TypeAdapter(_lenient(tp), config=STRICT)


@functools.cache
def _fields_adapter(cls) -> TypeAdapter:
    """Any subset of ``cls``'s fields, and nothing else: a model of them whose defaults (``None``)
    pydantic never checks - a field left out is the dataclass's to fill."""
    shape = {k: (_lenient(t), None) for k, t in field_types(cls).items()}
    return TypeAdapter(create_model(cls.__name__, __config__=STRICT, **shape))


def _refusal(loc, tp, value, where: str) -> str:
    """The error at ``loc`` (pydantic's path into ``value``) as the project words it: the path is
    followed along the annotation ``tp`` as far as it names a place (a union is refused whole)."""
    loc = list(loc)
    while loc and typing.get_origin(tp) not in _UNIONS:
        step, origin, args = loc.pop(0), typing.get_origin(tp), typing.get_args(tp)
        if origin is dict and loc[:1] == ["[key]"]:
            tp, value, where = args[0], step, f"{where} key {step!r}"
            break
        if origin is dict:
            tp, value, where = args[1], value[step], f"{where}.{step}"
        elif origin in (list, tuple):
            tp, value, where = args[0], value[step], f"{where}[{step}]"
        else:
            break
    expected = {list: "a list", tuple: "a list", dict: "a mapping"}.get(typing.get_origin(tp))
    return (
        f"{where} must be {expected or _type_name(tp)}, got {type(value).__name__} {short(value)}"
    )


def _type_name(tp) -> str:
    return getattr(tp, "__name__", None) or str(tp).replace("typing.", "")
