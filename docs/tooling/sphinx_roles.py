"""Griffe extension: the docstrings' Sphinx roles rendered as links, without editing the docstrings.

The package's docstrings cross-reference with Sphinx roles (``:class:`~disastir_mteb.x.Y```), which Markdown
shows raw. Once griffe has loaded a package, this rewrites each role in every docstring into an mkdocs-autorefs
cross-reference marked optional: a link where the target is rendered on some page of the site, its name in code
otherwise (a private helper), so a target that does not resolve never fails `mkdocs build --strict`. A target
outside the loaded package (mteb's, the standard library's) becomes code at once.

Names are resolved as Sphinx does: absolute (``disastir_mteb.x.Y``), in the docstring's scope (``Y``, ``Y.attr``,
an imported name), or relative to an enclosing module (``.x.Y``). ``~`` shows only the last component, and an
explicit title (``:meth:`title <target>```) is kept.
"""

from __future__ import annotations

import html
import re
from typing import TYPE_CHECKING, Any

import griffe

if TYPE_CHECKING:
    from collections.abc import Iterator

ROLE = re.compile(r":(?:py:)?(?:class|mod|func|meth|attr|data|exc|obj|const|type):`(?P<content>[^`]+)`")
TITLED = re.compile(r"(?P<title>.*?)\s*<(?P<target>[^<>]+)>", re.DOTALL)


def _objects(obj: griffe.Object) -> Iterator[griffe.Object]:
    """The object and every object defined in it (aliases left out: their docstrings are their targets')."""
    yield obj
    for member in obj.members.values():
        if not member.is_alias:
            yield from _objects(member)  # type: ignore[arg-type]


def _lookup(collection: griffe.ModulesCollection, path: str) -> griffe.Object | griffe.Alias | None:
    try:
        return collection[path]
    except (KeyError, griffe.AliasResolutionError, griffe.CyclicAliasError):
        return None


def _target(obj: griffe.Object, name: str, collection: griffe.ModulesCollection) -> str | None:
    """The canonical path of what ``name`` names in ``obj``'s docstring, or None outside the loaded packages."""
    relative = name.startswith(".")
    name = name.lstrip(".")
    candidates = []
    if not relative:
        candidates.append(name)
    first, _, rest = name.partition(".")
    try:
        scoped = obj.resolve(first)
    except griffe.NameResolutionError:
        pass
    else:
        candidates.append(f"{scoped}.{rest}" if rest else scoped)
    scope: griffe.Object | None = obj if obj.is_module else obj.module
    while scope is not None:
        candidates.append(f"{scope.path}.{name}")
        scope = scope.parent
    for candidate in candidates:
        found = _lookup(collection, candidate)
        if found is not None:
            try:
                return found.canonical_path
            except (griffe.AliasResolutionError, griffe.CyclicAliasError):
                return found.path
    return None


def rewrite(text: str, obj: griffe.Object, collection: griffe.ModulesCollection) -> str:
    """``text`` with every Sphinx role replaced by an optional cross-reference, or by code."""

    def replace(match: re.Match[str]) -> str:
        content = " ".join(match["content"].split())
        titled = TITLED.fullmatch(content)
        if titled:
            title, written = titled["title"], titled["target"]
        else:
            written = content
            title = written.lstrip("~.").rsplit(".", 1)[-1] if written.startswith("~") else written.lstrip(".")
        code = f"<code>{html.escape(title)}</code>"
        target = _target(obj, written.lstrip("~"), collection)
        if target is None:
            return code
        return f'<autoref identifier="{html.escape(target)}" optional>{code}</autoref>'

    return ROLE.sub(replace, text)


class SphinxRoles(griffe.Extension):
    """Rewrites the Sphinx roles of a package's docstrings once the package is loaded (names resolve then)."""

    def on_package(self, *, pkg: griffe.Module, loader: griffe.GriffeLoader, **kwargs: Any) -> None:
        """Griffe's event: ``pkg`` loaded in full, every name it imports known."""
        for obj in _objects(pkg):
            if obj.docstring is not None and ":" in obj.docstring.value:
                obj.docstring.value = rewrite(obj.docstring.value, obj, loader.modules_collection)
