"""Exceptions ember raises, and the lookup of the user's source line that every message names."""

from __future__ import annotations

import os
import sys
import types

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


def add_note(e: BaseException, note: str) -> None:
    """`e.add_note(note)` (Python 3.11+: printed under the message); on 3.10 kept in `__notes__` only."""
    if hasattr(e, "add_note"):
        e.add_note(note)
    else:
        e.__notes__ = [*getattr(e, "__notes__", ()), note]


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


# Each class is also the builtin exception JAX raises for the same mistake (checked against JAX 0.10),
# so `except TypeError` written for JAX catches ember's error too.

class ShapeError(EmberError, TypeError):
    """Operand shapes do not fit a primitive, a contraction or a reshape (TypeError, as JAX's shape rules)."""


class IncompatibleShapesError(EmberError, ValueError):
    """NumPy-level shapes that do not go together (broadcasting, stack, split, squeeze, einsum labels,
    at[] values): a ValueError, as in jax.numpy."""


class AxisError(EmberError, ValueError):
    """An axis argument out of bounds or repeated (ValueError, as in jax.numpy)."""


# Every shape error, whichever builtin it is: `except ember.errors.SHAPE_ERRORS:` catches them all.
SHAPE_ERRORS = (ShapeError, IncompatibleShapesError, AxisError)


class DTypeError(EmberError, TypeError):
    """Operand dtypes do not fit the operation."""


class ConcretizationError(EmberError, TypeError):
    """A traced value was used where Python needs a concrete value (bool, int, float, array)."""


class TracerEscapeError(EmberError, TypeError):
    """A traced value was used after the trace that created it had finished."""


class ArgumentError(EmberError, TypeError):
    """An argument or a return value is not an array, a scalar or a pytree of them."""


class ImmutableArrayError(EmberError, TypeError):
    """`x[i] = v` on a traced array: arrays are values; `x.at[i].set(v)` returns the updated one."""


class ArgumentValueError(EmberError, ValueError):
    """An argument of a supported type with a value ember rejects (an unhashable static argument, a
    NumPy masked array)."""


class TransformError(EmberError, TypeError):
    """grad, vjp or custom_vjp was applied in a way it cannot handle (TypeError, as in JAX)."""


class BatchingError(EmberError, ValueError):
    """vmap's axes or sizes do not fit its arguments (ValueError, as in JAX)."""


class IndexingError(EmberError, IndexError):
    """An index that does not fit the array (too many indices, two ellipses, a bad mask)."""


class NonConcreteBooleanIndexError(IndexingError):
    """A traced boolean mask used as an index: the result's shape would depend on the data."""


class DifferentiationError(EmberError, NotImplementedError):
    """grad or vjp met a primitive that has no derivative (nextafter; NotImplementedError, as in JAX)."""


class GraphError(EmberError, AssertionError):
    """A graph broke an IR invariant (found by Graph.verify)."""


def missing_attribute(module: str, name: str, namespace, fallback=None, hints: dict[str, str] | None = None,
                      jax_module: str | None = None) -> AttributeError:
    """The AttributeError for a name a submodule of ember lacks: whether JAX has it (in `jax_module`, by
    default the JAX module of the same name: ember.numpy -> jax.numpy), what to use instead (`hints`,
    name -> text; by default the module's table in ember/jax_names.py), the closest names the module
    has, and the NumPy function to fall back on outside traced code (`fallback`: (name, module))."""
    if name.startswith("__"):  # protocol probes (hasattr(m, "__wrapped__")): the plain error, no search
        return AttributeError(f"module {module!r} has no attribute {name!r}")
    import difflib

    from ember.jax_names import HINTS, JAX_NAMES, JAX_VERSION

    hints = HINTS.get(module, {}) if hints is None else hints
    jax_module = jax_module or "jax" + module[len("ember"):]
    in_jax = name in JAX_NAMES.get(jax_module, ())
    in_fallback = fallback is not None and hasattr(fallback[1], name)
    if in_jax:
        text = f"{module}.{name} is not implemented in Ember yet (JAX {JAX_VERSION} has {jax_module}.{name})"
    elif in_fallback:
        text = f"{module}.{name} is not implemented in Ember yet ({jax_module} has no {name} either)"
    else:
        others = dict.fromkeys([jax_module] + ([fallback[0]] if fallback is not None else []))
        text = f"module {module!r} has no attribute {name!r} (nor has {' or '.join(others)})"
    if name in hints:
        text += f"; {hints[name]}"
    public = [k for k, v in namespace.items() if not k.startswith("_") and type(v).__name__ != "module"]
    close = difflib.get_close_matches(name, public, n=3, cutoff=0.6)
    if close:
        text += "; the closest names it has: " + ", ".join(f"{module}.{c}" for c in close)
    if in_fallback:
        text += (f". Outside traced functions {fallback[0]}.{name} works on the arrays Ember returns (they are "
                 "NumPy arrays); inside jit/grad/vmap, build it from the ember.numpy functions that exist")
    return AttributeError(text)


# --- traceback filtering ---------------------------------------------------------------------------

_BOUNDARIES: set = set()  # code objects of the API entry points (jit/grad/vmap calls, vjp)
_HIDDEN_NOTE = ("--------------------\nEmber removed its internal frames from this traceback; set "
                "EMBER_TRACEBACK_FILTERING=off to show them.")


def api_boundary(fn):
    """Mark `fn` as an API entry point whose `except` calls `filter_traceback` (the outermost filters)."""
    _BOUNDARIES.add(fn.__code__)
    return fn


def traceback_filtering() -> bool:
    """Whether to hide ember's frames: on unless EMBER_TRACEBACK_FILTERING is off (read at each error)."""
    return os.environ.get("EMBER_TRACEBACK_FILTERING", "on").strip().lower() not in ("off", "0", "false", "no")


_GENERIC_NAMES = {"wrapper", "method", "fn", "full", "impl", "__call__", "<listcomp>", "<genexpr>", "bind"}


def _op_name(tb) -> str:
    """The ember function a user's line called, skipping generic wrappers (`wrapper`, `method`)."""
    first = tb.tb_frame.f_code.co_name
    while tb is not None:
        name = tb.tb_frame.f_code.co_name
        if name not in _GENERIC_NAMES and not name.startswith("_"):
            return name
        tb = tb.tb_next
    return first


def filter_traceback(e: BaseException) -> None:
    """Drop the frames inside the ember package from `e`'s traceback, as JAX's traceback filtering does,
    and add a note saying so; called by the outermost API boundary on the way out (then `raise` bare, so
    the boundary's own frame is not added back). With EMBER_TRACEBACK_FILTERING=off nothing changes."""
    frame = sys._getframe(2)  # the boundary's caller: an enclosing boundary filters instead
    while frame is not None:
        if frame.f_code in _BOUNDARIES:
            return
        frame = frame.f_back
    kept, hidden, last_user = [], 0, None
    tb = e.__traceback__
    while tb is not None:
        if _is_internal(tb.tb_frame.f_code.co_filename):
            hidden += 1
        else:
            kept.append(tb)
            last_user = tb
        tb = tb.tb_next
    if not isinstance(e, EmberError) and last_user is not None and last_user.tb_next is not None:
        # Not ember's own error but raised inside ember (NumPy's, a rule's): name the user's line it came from.
        where = f"{_short_path(last_user.tb_frame.f_code.co_filename)}:{last_user.tb_lineno}"
        if where not in str(e) and not any(where in n for n in getattr(e, "__notes__", ())):
            add_note(e, f"raised inside ember by {_op_name(last_user.tb_next)}, called at {where}")
    if not hidden or not traceback_filtering():
        return
    new = None
    for t in reversed(kept):
        new = types.TracebackType(new, t.tb_frame, t.tb_lasti, t.tb_lineno)
    e.with_traceback(new)
    if _HIDDEN_NOTE not in getattr(e, "__notes__", ()):
        add_note(e, _HIDDEN_NOTE)
