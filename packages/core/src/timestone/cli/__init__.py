"""The ``timestone`` command line (Typer and Rich): ``timestone --help`` lists the commands."""

from __future__ import annotations

import sys

__all__ = ["main"]


def main() -> None:
    """Entry point of the ``timestone`` console script."""
    from ._app import main as run

    sys.exit(run())
