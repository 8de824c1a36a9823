"""The ``hexeract`` command line (docs/cli.md). Not in the Lambda layer: it needs click, which the
layer does not install."""

from __future__ import annotations

from hexeract_scheduler.cli.commands import main

__all__ = ["main"]
