"""Pickling transformed functions (jit, grad, vmap, value_and_grad, jacrev, hessian, custom_vjp and their
compositions), so they ship to Dask workers: a function carries its underlying function and options,
never compiled code or a cache (the worker compiles on first call, from the disk cache when it has the
entry).

An object reachable under its module and qualified name (a module-level `@jit def f`) pickles by that
name, as a plain function does. Otherwise it pickles as the recipe that rebuilds it (the transform and its
arguments); the function inside goes by name when it is importable and, when it is not (a lambda, a
closure), by value through cloudpickle, whose bytes the pickle embeds, so `pickle` and Dask's cloudpickle
both take it. A function closing over something that cannot be pickled raises a PicklingError naming
that variable, where cloudpickle alone would only name its type.
"""

from __future__ import annotations

import pickle
from collections.abc import Callable

from ember.naming import resolves


def importable(obj) -> bool:
    """Whether `obj` is what its module's attribute at its qualified name holds (so it pickles by name)."""
    module, qualname = getattr(obj, "__module__", None), getattr(obj, "__qualname__", None)
    # a script's own functions (__main__) are not importable on a worker, whose __main__ is another
    if not module or not qualname or "<locals>" in qualname or module == "__main__":
        return False
    return resolves(obj)


def reduce(obj, rebuild: Callable, *args) -> str | tuple:
    """`obj.__reduce__()`: its qualified name where importable, else `rebuild(*args)` with each callable
    argument that is not importable carried by value."""
    if importable(obj):
        return obj.__qualname__
    return rebuild, tuple(ByValue(a) if callable(a) and not importable(a) else a for a in args)


class ByValue:
    """A function pickled by value: cloudpickle's bytes, embedded in whatever pickle carries them."""

    def __init__(self, fun: Callable):
        self.fun = fun

    def __reduce__(self):
        try:
            import cloudpickle
        except ImportError:  # plain pickle only: it refuses a lambda or closure with its own message
            return _identity, (self.fun,)
        try:
            data = cloudpickle.dumps(self.fun)
        except Exception as e:  # noqa: BLE001 - re-raised naming the captured value that failed
            raise unpicklable(self.fun, e) from e
        return load_by_value, (data,)


_LOADED: dict = {}  # sha256 of cloudpickle bytes -> the function they made in this process (most recent last)
MAX_LOADED = 256


def load_by_value(data: bytes):
    """The function pickled by value in `data`, made once per process: every task of a Dask graph carries
    the same bytes, and the same object means one jit cache, so a worker traces and compiles it once."""
    import hashlib

    import cloudpickle

    key = hashlib.sha256(data).digest()
    fn = _LOADED.pop(key, None)
    if fn is None:
        fn = cloudpickle.loads(data)
        if len(_LOADED) >= MAX_LOADED:
            _LOADED.pop(next(iter(_LOADED)))
    _LOADED[key] = fn
    return fn


def _identity(x):
    return x


def unpicklable(fun: Callable, error: Exception) -> pickle.PicklingError:
    """The error for `fun` failing to pickle: the closure variable, global or default that cannot be
    pickled, by name, and what to do."""
    import cloudpickle

    name = getattr(fun, "__qualname__", None) or type(fun).__name__
    for what, value in _captured(fun):
        try:
            cloudpickle.dumps(value)
        except Exception as e:  # noqa: BLE001 - this value is the culprit
            return pickle.PicklingError(
                f"{name} cannot be pickled (to send it to another process, e.g. a Dask worker): it {what} of "
                f"type {type(value).__name__}, which cannot be pickled ({type(e).__name__}: {e}). Pass it as an "
                "argument, create it inside the function, or make it a module-level name the worker imports")
    return pickle.PicklingError(f"{name} cannot be pickled: {type(error).__name__}: {error}")


def _captured(fun: Callable):
    """(description, value) of what pickling `fun` by value carries: closure cells, the globals its
    code names (not modules), its defaults; for a transformed function, its underlying function's."""
    inner = getattr(fun, "__wrapped__", None)
    if inner is not None and inner is not fun:
        yield from _captured(inner)
    code = getattr(fun, "__code__", None)
    if code is None:
        return
    for var, cell in zip(code.co_freevars, getattr(fun, "__closure__", None) or ()):
        try:
            yield f"closes over `{var}`", cell.cell_contents
        except ValueError:  # an empty cell
            continue
    module_globals = getattr(fun, "__globals__", {})
    for var in code.co_names:
        value = module_globals.get(var)
        if value is not None and type(value).__name__ != "module":
            yield f"reads the global `{var}`", value
    for k, value in enumerate(getattr(fun, "__defaults__", None) or ()):
        yield f"has default argument {k}", value
