"""The module paths of 0.1 (one flat package), kept for one release: importing one warns
(``DeprecationWarning``) and gives the module that holds its code now. Nothing in the package
imports an old path; ``tests/unit/test_architecture.py`` checks every entry resolves."""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
import types
import warnings
from collections.abc import Sequence
from typing import Any

PACKAGE = "hexeract_scheduler"

# Old module (under hexeract_scheduler) -> the module(s) that hold its names now, first match wins.
MOVED: dict[str, tuple[str, ...]] = {
    "bounds": ("service.bounds",),
    "checks": ("domain.checks",),
    "cli_common": ("cli.errors", "cli.options"),
    "cli_format": ("cli.render",),
    "cli_input": ("cli.parse",),
    "cli_worker": ("cli.worker",),
    "clock": ("domain.clock",),
    "contract": ("store.contract",),
    "cron": ("domain.cron",),
    "dynamo": ("store.dynamo",),
    "dynamo.admin": ("store.dynamo.admin",),
    "dynamo.base": ("store.dynamo.base",),
    "dynamo.claims": ("store.dynamo.claims",),
    "dynamo.codec": ("store.dynamo.codec",),
    "dynamo.expressions": ("store.dynamo.expressions",),
    "dynamo.payloads": ("store.dynamo.payloads",),
    "dynamo.schema": ("store.dynamo.schema",),
    "lambda_ops": ("service.dispatcher", "service.dead_letter"),
    "memory": ("store.memory",),
    "model": ("domain.model",),
    "observability": ("service.observability",),
    "occurrence": ("domain.occurrence",),
    "settings": ("service.settings", "service.bounds"),
    "settle": ("engine.settle",),
    "shards": ("domain.shards",),
    "sink_checks": ("sinks.refusals",),
    "stack": ("aws.stack",),
    "summary": ("engine.summary",),
    "target": ("domain.target",),
    "worker": ("engine.worker", "engine.config", "engine.summary"),
    "worker_config": ("engine.config",),
}


class _Merged(types.ModuleType):
    """An old module whose names now live in several modules."""

    def __init__(self, name: str, parts: Sequence[types.ModuleType]) -> None:
        super().__init__(name)
        self._parts = parts

    def __getattr__(self, attr: str) -> Any:
        for part in self._parts:
            if hasattr(part, attr):
                return getattr(part, attr)
        raise AttributeError(f"module {self.__name__!r} has no attribute {attr!r}")


class _MovedFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(
        self, fullname: str, path: object = None, target: object = None
    ) -> importlib.machinery.ModuleSpec | None:
        old = fullname.removeprefix(PACKAGE + ".")
        if not fullname.startswith(PACKAGE + ".") or old not in MOVED:
            return None
        return importlib.machinery.ModuleSpec(fullname, self, is_package=old == "dynamo")

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        old = spec.name.removeprefix(PACKAGE + ".")
        new = [f"{PACKAGE}.{name}" for name in MOVED[old]]
        warnings.warn(
            f"{spec.name} moved to {' and '.join(new)}; the old path is kept for one release",
            DeprecationWarning,
            stacklevel=2,
        )
        parts = [importlib.import_module(name) for name in new]
        return parts[0] if len(parts) == 1 else _Merged(spec.name, parts)

    def exec_module(self, module: types.ModuleType) -> None:
        """The module is already executed: it is the new one (or a view of several)."""


def install() -> None:
    if not any(isinstance(f, _MovedFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, _MovedFinder())  # before the path finder, which would load a second copy
