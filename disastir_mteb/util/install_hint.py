"""The one ``pip install`` command an error gives when a package it needs is missing."""

from __future__ import annotations

import importlib

from disastir_mteb.util.errors import MissingPackage

__all__ = ["DISTRIBUTION", "install_hint", "require_extra"]

#: The plugin's name on PyPI.
DISTRIBUTION = "disastir-mteb"


def install_hint(extra: str | None = None) -> str:
    """The command that installs ``extra`` (None: the plain package), double-quoted so the brackets survive zsh."""
    return f'pip install "{DISTRIBUTION}[{extra}]"' if extra else f'pip install "{DISTRIBUTION}"'


def require_extra(module: str, *, extra: str, needed_by: str) -> None:
    """Import ``module`` now, or stop with the one sentence that says which ``extra`` brings it.

    Raises:
        ImportError: e.g. ``The judge needs openai: pip install "disastir-mteb[judge]"``.
    """
    try:
        importlib.import_module(module)
    except ImportError:
        raise MissingPackage(f"{needed_by} needs {module}: {install_hint(extra)}") from None
