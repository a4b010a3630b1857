"""The one ``pip install`` command an error gives when a package it needs is missing.

Every optional feature names the extra of ``pyproject.toml`` that brings its packages (``demo``, ``lora``,
``leaderboard``, ``judge``, ``servers``, ``plots``); a package this plugin always requires (usearch) missing
means an incomplete installation, which installing the plugin again completes (pip installs the requirements
it lacks). One function writes the command, so no message tells a user to install a bare package that the
plugin pins or names an extra the plugin does not have (``tests/test_newcomer.py`` checks each extra named here
exists). :func:`require_extra` checks a package before a command does any work.
"""

from __future__ import annotations

import importlib

from disastir_mteb.util.errors import MissingPackage

__all__ = ["DISTRIBUTION", "install_hint", "require_extra"]

#: The plugin's name on PyPI.
DISTRIBUTION = "disastir-mteb"


def install_hint(extra: str | None = None) -> str:
    """The command that installs what is missing: ``pip install "disastir-mteb[lora]"``.

    Args:
        extra: the optional-dependencies group of ``pyproject.toml``; None for a package every installation
            has (the plugin installed again brings it).

    Returns:
        The command, double-quoted so that the brackets survive zsh and Windows shells alike.

    Examples:
        >>> install_hint("demo")
        'pip install "disastir-mteb[demo]"'
        >>> install_hint()
        'pip install "disastir-mteb"'
    """
    return f'pip install "{DISTRIBUTION}[{extra}]"' if extra else f'pip install "{DISTRIBUTION}"'


def require_extra(module: str, *, extra: str, needed_by: str) -> None:
    """Import ``module`` now, or stop with the one sentence that says which extra brings it.

    Called where a feature starts (a command, after its options are checked and before any work), so that a
    missing extra is said at once, not after the data and the model have loaded.

    Args:
        module: the package to import (``openai``).
        extra: the optional-dependencies group of ``pyproject.toml`` that brings it (``judge``).
        needed_by: what needs it, the sentence's subject (``The judge``, ``--embeddings-url``).

    Raises:
        ImportError: ``module`` cannot be imported (a MissingPackage), e.g. ``The judge needs openai: pip install
            "disastir-mteb[judge]"``.
    """
    try:
        importlib.import_module(module)
    except ImportError:
        raise MissingPackage(f"{needed_by} needs {module}: {install_hint(extra)}") from None
