"""The project's one error type for what the user can fix: :class:`DisastirError`, said in one sentence.

Each subclass is also the built-in error it would otherwise be, so ``except ValueError`` still catches it.
"""

from __future__ import annotations

__all__ = ["BrowserError", "BrowserTimeout", "DisastirError", "ExistingOutput", "InvalidInput", "MissingInput",
           "MissingPackage", "NotAFolder", "NotAnEncoder", "UnknownName"]


class DisastirError(Exception):
    """An error of the user's input or surroundings, whose message is one sentence saying what and what to do."""

    def __str__(self) -> str:
        """The sentence as written (a ``KeyError`` would quote it)."""
        if len(self.args) == 1:
            return str(self.args[0])
        return super().__str__()


class InvalidInput(DisastirError, ValueError):
    """A value given (an option, an argument, a file's content) that cannot be used."""


class MissingInput(DisastirError, FileNotFoundError):
    """A file or folder the input names that is not there."""


class ExistingOutput(DisastirError, FileExistsError):
    """An output that is there already and would be overwritten."""


class NotAFolder(DisastirError, NotADirectoryError):
    """A path that must be a folder and is a file."""


class UnknownName(DisastirError, KeyError):
    """A name (a task, a source) that is not one the project knows."""


class MissingPackage(DisastirError, ImportError):
    """An optional package a feature needs, with the ``pip install`` that brings it."""


class NotAnEncoder(DisastirError, TypeError):
    """A model object that cannot embed texts."""


class BrowserError(DisastirError, RuntimeError):
    """The headless browser failed (its last output lines quoted)."""


class BrowserTimeout(DisastirError, TimeoutError):
    """A page that did not become ready in the time given."""
