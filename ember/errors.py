"""Exceptions ember raises, and the lookup of the user's source line that every message names."""

from __future__ import annotations

import os
import sys

_PKG_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep
# Files inside the package that are user code for the purpose of locations.
_USER_FILES = {os.path.join(_PKG_DIR, "demo.py")}
_internal_cache: dict[str, bool] = {}


def _is_internal(filename: str) -> bool:
    hit = _internal_cache.get(filename)
    if hit is None:
        path = os.path.abspath(filename)
        hit = (path.startswith(_PKG_DIR) and path not in _USER_FILES) or filename.startswith("<frozen")
        _internal_cache[filename] = hit
    return hit


def user_location() -> str | None:
    """'file.py:LINE' of the innermost frame outside the ember package (the user's line), or None."""
    frame = sys._getframe(1)
    while frame is not None:
        filename = frame.f_code.co_filename
        if not _is_internal(filename):
            return f"{_short_path(filename)}:{frame.f_lineno}"
        frame = frame.f_back
    return None


_short_cache: dict[tuple[str, str], str] = {}


def _short_path(filename: str) -> str:
    key = (os.getcwd(), filename)
    short = _short_cache.get(key)
    if short is None:
        try:
            rel = os.path.relpath(filename)
        except ValueError:
            rel = filename
        short = _short_cache[key] = filename if rel.startswith(".." + os.sep + "..") else rel
    return short


class EmberError(Exception):
    """Base class of ember's errors. `loc` is the user's file:line when known."""

    def __init__(self, message: str, loc: str | None = None):
        self.message = message
        self.loc = loc
        super().__init__(self._text())

    def _text(self) -> str:
        return f"{self.message} (at {self.loc})" if self.loc else self.message

    def with_loc(self, loc: str | None) -> EmberError:
        """Attach the user's location if the error does not carry one yet."""
        if self.loc is None and loc is not None:
            self.loc = loc
            self.args = (self._text(),)
        return self


class ShapeError(EmberError, ValueError):
    """Operand shapes do not fit the operation."""


class DTypeError(EmberError, TypeError):
    """Operand dtypes do not fit the operation."""


class ConcretizationError(EmberError, TypeError):
    """A traced value was used where Python needs a concrete value (bool, int, float, array)."""


class TracerEscapeError(EmberError, RuntimeError):
    """A traced value was used after the trace that created it had finished."""


class ArgumentError(EmberError, TypeError):
    """An argument or a return value is not an array, a scalar or a pytree of them."""


class TransformError(EmberError, ValueError):
    """A transform (grad, vmap, ...) was applied in a way it cannot handle."""


class GraphError(EmberError, AssertionError):
    """A graph broke an IR invariant (found by Graph.verify)."""
