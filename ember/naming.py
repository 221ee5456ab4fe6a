"""Public functions made by factories (`_unary.<locals>.fn`) named as they are exported, so pickle and
cloudpickle send them by reference (a Dask worker imports `ember.numpy.tanh`) rather than by value, which
would copy the function without its registrations."""

from __future__ import annotations

import sys
import types
from collections.abc import Iterable


def resolves(fn) -> bool:
    """Whether `fn` is what its module holds at its qualified name."""
    found = sys.modules.get(getattr(fn, "__module__", None) or "")
    for part in (getattr(fn, "__qualname__", None) or "<none>").split("."):
        found = getattr(found, part, None)
        if found is None:
            return False
    return found is fn


def publish(namespace: dict, module: str, names: Iterable[str]) -> None:
    """Give each function of `names` in `namespace` that does not resolve under its own module and
    qualified name the module and name it is exported as (`module`.`name`)."""
    for name in names:
        fn = namespace.get(name)
        if isinstance(fn, types.FunctionType) and not resolves(fn):
            fn.__module__, fn.__qualname__ = module, name
