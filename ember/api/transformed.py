"""`Transformed`, what grad, value_and_grad, jacrev and vmap return: inlined while tracing, run through
an implicit jit of itself (cached per signature, shared by every wrapper of the same function and
options) when called with concrete arrays, and evaluated with values known for a call whose Python
control flow needs them."""

from __future__ import annotations

import functools
import pickle
from collections.abc import Callable

from ember.api import pickling
from ember.api.jit import Jitted
from ember.api.tracing import call_with_known_values, fun_name, leaf_avals
from ember.errors import ConcretizationError, api_boundary, filter_traceback
from ember.tracer.trace import is_tracing
from ember.tree import tree_flatten

_MAX_REMEMBERED = 256


def _signature(args: tuple, kwargs: dict):
    """Structure and avals of a call: an abstract trace fails or succeeds alike for every call with it."""
    leaves, tree = tree_flatten((args, kwargs))
    return tree, tuple(leaf_avals(leaves, (args, kwargs)))


def _rebuild(transform: Callable, *args) -> Callable:
    return transform(*args)


def cache_key_of(fun: Callable):
    """(root function, chain of (transform, options)) naming the compiled cache of `fun`, or None when
    it cannot be shared (a transform without hashable options)."""
    key = getattr(fun, "_cache_key", None)
    return key() if callable(key) else (fun, ())


class Transformed:
    """A transformed function (grad, vmap, ...): inlined while tracing, compiled and cached by an
    implicit jit when called with concrete arrays; its cache is shared by every wrapper of the same
    function with the same options. A call that needs concrete values (Python control flow on them)
    falls back to evaluating with values known, for that call only."""

    def __init__(self, impl: Callable, wrapped: Callable, kind: str, options=None, recipe: tuple | None = None):
        functools.update_wrapper(self, wrapped)
        self._impl = impl
        self._recipe = recipe  # (the public transform, its arguments): what a pickle rebuilds it from
        self._kind = kind
        self._options = options
        self._jitted = None
        self._needs_values: set = set()  # signatures whose trace needed concrete values

    @api_boundary
    def __call__(self, *args, **kwargs):
        try:
            if is_tracing():
                return self._impl(*args, **kwargs)
            if self._needs_values and _signature(args, kwargs) in self._needs_values:
                return call_with_known_values(self._impl, args, kwargs)
            try:
                return (self._jitted or self._jit())(*args, **kwargs)
            except ConcretizationError:
                if len(self._needs_values) >= _MAX_REMEMBERED:
                    self._needs_values.clear()
                self._needs_values.add(_signature(args, kwargs))
                return call_with_known_values(self._impl, args, kwargs)
        except Exception as e:
            filter_traceback(e)
            raise

    def __reduce__(self):
        """Pickled as the transform and its arguments (the function by name where importable)."""
        if self._recipe is None:
            raise pickle.PicklingError(f"{self!r} cannot be pickled: it was built without its transform's recipe")
        transform, args = self._recipe
        return pickling.reduce(self, _rebuild, transform, *args)

    def _cache_key(self):
        if self._options is None:
            return None
        inner = cache_key_of(self.__wrapped__)
        if inner is None:
            return None
        root, chain = inner
        return root, chain + ((self._kind, self._options),)

    def _jit(self):
        if self._jitted is None:
            self._jitted = Jitted(self._impl, cache_key=self._cache_key())
            self._jitted.__name__ = f"{self._kind}({fun_name(self.__wrapped__)})"
        return self._jitted

    def lower(self, *args, **kwargs):
        return self._jit().lower(*args, **kwargs)

    def cache_info(self):
        return self._jit().cache_info()

    def __repr__(self):
        return f"<{self._kind} of {fun_name(self.__wrapped__)}>"
