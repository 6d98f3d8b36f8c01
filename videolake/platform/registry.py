"""One registry per pluggable thing (scene detector, scorer, captioner backend, object store), looked up by name.

Registration happens in one place per kind: the registry names its built-in modules (imported on first lookup, so
that importing the registry stays cheap) and an entry-point group, through which an installed package adds its own
implementations without touching videolake:

    # the plugin package's pyproject.toml
    [project.entry-points."videolake.scene_detectors"]
    shotnet = "shotnet_videolake.detector"      # a module that registers itself, or a class to register as "shotnet"

A plugin is then one module (its class, registered with ``@DETECTORS.register("shotnet")`` or named by the entry
point) plus its test. Entry points are read only when a name is not among the built-ins (or when all names are
listed), so the default detector's start-up never scans the installed packages.
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")

log = logging.getLogger(__name__)


class Registry(Generic[T]):
    """Maps a name to an implementation class. Use as a decorator: ``@DETECTORS.register("adaptive")``.

    ``builtins``: modules that register the shipped implementations when imported. ``entry_point_group``: the
    ``importlib.metadata`` entry-point group installed plugins use (each entry point's name is the plugin's name;
    its object is a module that registers itself, or the class itself).
    """

    def __init__(self, kind: str, *, builtins: tuple[str, ...] = (), entry_point_group: str | None = None) -> None:
        self.kind = kind
        self.builtins = builtins
        self.entry_point_group = entry_point_group
        self._items: dict[str, type[T]] = {}
        self._builtins_loaded = not builtins
        self._plugins_loaded = entry_point_group is None
        self._broken: dict[str, str] = {}  # plugin name -> why it did not load

    def register(self, name: str) -> Callable[[type[T]], type[T]]:
        def wrap(cls: type[T]) -> type[T]:
            if name in self._items and self._items[name] is not cls:
                raise ValueError(f"{self.kind} {name!r} is already registered by {self._items[name].__qualname__}")
            self._items[name] = cls
            cls.registered_name = name  # type: ignore[attr-defined]
            return cls

        return wrap

    def _load_builtins(self) -> None:
        if self._builtins_loaded:
            return
        self._builtins_loaded = True  # first: the modules call register() while they import
        for module in self.builtins:
            importlib.import_module(module)

    def _load_plugins(self) -> None:
        """Import the installed plugins of ``entry_point_group``. A plugin that fails to import is recorded (and
        named when asked for), never allowed to break the built-ins."""
        group = self.entry_point_group
        if self._plugins_loaded or group is None:
            return
        self._plugins_loaded = True
        from importlib.metadata import entry_points

        for ep in entry_points(group=group):
            try:
                obj = ep.load()
            except Exception as exc:  # noqa: BLE001 - any import error of a third-party module
                self._broken[ep.name] = f"{type(exc).__name__}: {exc}"
                log.warning("%s plugin %r (%s) did not load: %s", self.kind, ep.name, ep.value, exc)
                continue
            if isinstance(obj, type) and ep.name not in self._items:
                self.register(ep.name)(obj)
            if ep.name not in self._items:
                self._broken[ep.name] = f"{ep.value} registered no {self.kind} named {ep.name!r}"

    def get(self, name: str) -> type[T]:
        self._load_builtins()
        if name not in self._items:
            self._load_plugins()
        try:
            return self._items[name]
        except KeyError:
            if name in self._broken:
                raise KeyError(
                    f"{self.kind} plugin {name!r} is installed but did not load: {self._broken[name]}"
                ) from None
            raise KeyError(f"unknown {self.kind} {name!r}; known: {', '.join(self.names()) or '(none)'}") from None

    def names(self) -> list[str]:
        self._load_builtins()
        self._load_plugins()
        return sorted(self._items)

    def __contains__(self, name: str) -> bool:
        self._load_builtins()
        if name not in self._items:
            self._load_plugins()
        return name in self._items
