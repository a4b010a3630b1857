"""The one ``pip install`` command an error gives when a package it needs is missing.

One function writes it, so no message names a bare package the plugin pins or an extra it does not have.
"""

from __future__ import annotations

import importlib

from disastir_mteb.util.errors import MissingPackage

__all__ = ["DISTRIBUTION", "install_hint", "require_extra"]

#: The plugin's name on PyPI.
DISTRIBUTION = "disastir-mteb"


def install_hint(extra: str | None = None) -> str:
    """The command that installs what is missing, double-quoted so the brackets survive zsh and Windows shells.

    ``extra`` is the optional-dependencies group; None for a package every installation has.

    Examples:
        >>> install_hint("demo")
        'pip install "disastir-mteb[demo]"'
    """
    return f'pip install "{DISTRIBUTION}[{extra}]"' if extra else f'pip install "{DISTRIBUTION}"'


def require_extra(module: str, *, extra: str, needed_by: str) -> None:
    """Import ``module`` now, or stop with the one sentence that says which ``extra`` brings it.

    Called where a feature starts, so a missing extra is said before the data and the model load.

    Raises:
        ImportError: e.g. ``The judge needs openai: pip install "disastir-mteb[judge]"``.
    """
    try:
        importlib.import_module(module)
    except ImportError:
        raise MissingPackage(f"{needed_by} needs {module}: {install_hint(extra)}") from None
