"""The one ``pip install`` command an error gives when a package it needs is missing.

Every optional feature names the extra of ``pyproject.toml`` that brings its packages (``demo``, ``lora``,
``leaderboard``); a package this plugin always requires (usearch, matplotlib) missing means an incomplete
installation, which installing the plugin again completes (pip installs the requirements it lacks). One
function writes the command, so no message tells a user to install a bare package that the plugin pins or
names an extra the plugin does not have (``tests/test_newcomer.py`` checks each extra named here exists).
"""

from __future__ import annotations

__all__ = ["DISTRIBUTION", "install_hint"]

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
