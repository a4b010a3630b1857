"""Hatch build hook: editable installs get only the autoload hook, not a copy of task_metadata/.

A regular wheel force-includes ``task_metadata/`` as ``disastir_mteb/task_metadata``; an editable
install must read the live folder from the checkout instead, so it ships just the two hook files.
"""

from __future__ import annotations

from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

_HOOK_FILES = ("disastir_mteb.pth", "_disastir_mteb_autoload.py")


class CustomBuildHook(BuildHookInterface):
    """Restrict force-included files for ``pip install -e``."""

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        """Called by hatchling before each build; ``version`` is 'standard' or 'editable'."""
        if version == "editable":
            build_data["force_include_editable"] = {name: name for name in _HOOK_FILES}
