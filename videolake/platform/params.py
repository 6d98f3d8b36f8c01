"""Typed, described plugin parameters: each scene detector's and quality scorer's ``Config`` is a frozen dataclass
whose fields are declared with ``param(default, help, ...)``; ``parse_params`` turns user input (Dagster run config,
``--param KEY=VALUE``) into that dataclass, with one clear error naming the plugin, the field and what it accepts.

Why: a ``dict[str, float]`` of overrides cannot carry an ``int`` window, a ``bool`` switch or a ``str`` device,
and a misspelt key used to surface as a ``TypeError`` from the dataclass constructor.
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Mapping
from typing import Any


class ParamError(ValueError):
    """A plugin parameter that does not exist or does not fit its field (the message says which and why)."""


def param(
    default: Any, help: str, *, min: float | None = None, max: float | None = None, choices: tuple | None = None
) -> Any:
    """A config field with its description and the values it accepts (read by ``parse_params`` and ``describe``)."""
    return dataclasses.field(default=default, metadata={"help": help, "min": min, "max": max, "choices": choices})


_BOOL_TEXT = {"true": True, "false": False, "1": True, "0": False, "yes": True, "no": False}


def _field_types(config_cls: type) -> dict[str, type]:
    hints = typing.get_type_hints(config_cls)
    return {f.name: hints[f.name] for f in dataclasses.fields(config_cls)}


_NUMBER_NAMES = {int: "an integer", float: "a number"}


def _coerce(owner: str, name: str, typ: type, value: Any) -> Any:
    """``value`` as ``typ`` (bool, int, float or str); text from a command line is parsed, nothing else is guessed."""
    where = f"{owner}: parameter {name!r}"
    if typ is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.strip().lower() in _BOOL_TEXT:
            return _BOOL_TEXT[value.strip().lower()]
        raise ParamError(f"{where} must be true or false, got {value!r}")
    if typ in _NUMBER_NAMES:  # int or float: never a bool; a float becomes an int only when it is whole
        if isinstance(value, str):
            try:
                return typ(value.strip())
            except ValueError:
                pass
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            if typ is float or float(value).is_integer():
                return typ(value)
        raise ParamError(f"{where} must be {_NUMBER_NAMES[typ]}, got {value!r}")
    if typ is str:
        if isinstance(value, str):
            return value
        raise ParamError(f"{where} must be a string, got {value!r}")
    raise TypeError(f"{owner}: field {name!r} has unsupported type {typ!r}")  # a bug in the Config, not user input


def _check(owner: str, f: dataclasses.Field, value: Any) -> None:
    meta = f.metadata
    where = f"{owner}: parameter {f.name!r}"
    if meta.get("choices") is not None and value not in meta["choices"]:
        raise ParamError(f"{where} must be one of {list(meta['choices'])}, got {value!r}")
    if meta.get("min") is not None and value < meta["min"]:
        raise ParamError(f"{where} must be >= {meta['min']}, got {value!r}")
    if meta.get("max") is not None and value > meta["max"]:
        raise ParamError(f"{where} must be <= {meta['max']}, got {value!r}")


def parse_params(
    config_cls: type, params: Mapping[str, Any] | None, owner: str = "detector", base: Any | None = None
) -> Any:
    """``config_cls`` (or ``base``) with ``params`` applied, every value typed and range-checked.

    Raises ``ParamError`` for an unknown name (listing the known ones), a value of the wrong type or out of range.
    """
    fields = {f.name: f for f in dataclasses.fields(config_cls)}
    types = _field_types(config_cls)
    values = dataclasses.asdict(base) if base is not None else {}
    for key, value in dict(params or {}).items():
        name = str(key).replace("-", "_")
        if name not in fields:
            raise ParamError(f"{owner}: unknown parameter {key!r}; known: {', '.join(sorted(fields))}")
        values[name] = _coerce(owner, name, types[name], value)
    cfg = config_cls(**values)
    for f in dataclasses.fields(config_cls):
        _check(owner, f, getattr(cfg, f.name))
    return cfg


def plugin_params(config_cls: type | None, params: Mapping[str, Any] | None, owner: str, reads: str) -> Any:
    """A plugin's typed settings: ``parse_params`` of its ``Config``; None for a plugin without one (a built-in that
    reads a config of its own, named by ``reads``), which refuses any parameter given to it."""
    if config_cls is None:
        if params:
            raise ParamError(f"{owner} takes no parameters (it reads {reads}); got {dict(params)}")
        return None
    return parse_params(config_cls, params, owner)


def describe(config_cls: type) -> list[dict[str, Any]]:
    """One dict per field: name, type, default, help, and min/max/choices where set (for help texts and docs)."""
    types = _field_types(config_cls)
    out = []
    for f in dataclasses.fields(config_cls):
        row = {"name": f.name, "type": types[f.name].__name__, "default": f.default, "help": f.metadata.get("help", "")}
        row.update({k: f.metadata[k] for k in ("min", "max", "choices") if f.metadata.get(k) is not None})
        out.append(row)
    return out
