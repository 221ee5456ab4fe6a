"""The eager fast path's native tier. Once the Python fast path has served `NATIVE_AFTER` of the calls
that have a native version in this process, those calls' Python code is swapped for CPython builtins
compiled from LLVM IR (ember.backends.llvm.eager, registered by `ember/__init__`: this layer does not
import the backends): `x.at`, `.at[key]`, `.at[key].set(v)` and a reduction's lane over every axis
(`sum(x)`). A process that makes a handful of eager calls never pays the compiler's setup (~70 ms).

Both tiers give the same results: a native callable serves only the calls its Python version would
serve the same way, and hands every other call to it. The option `ember_eager_native`
(EMBER_EAGER_NATIVE=0) keeps everything in Python; a compiler that cannot serve this Python or NumPy
(an unknown object layout) leaves the Python tier in place and says why in `status`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from ember import config

NATIVE_AFTER = 200  # calls served by the Python tier before the native one is compiled
_NEVER = 1 << 62
_compiler: Callable[[dict], dict] | None = None
_countdown = NATIVE_AFTER if config.eager_native else _NEVER
_lock = threading.Lock()
_python: dict = {}  # what the native tier replaced: (owner, attribute) -> the Python object
status = "not compiled yet" if config.eager_native else "off (ember_eager_native)"  # or "installed", or why not


def register(compiler: Callable[[dict], dict]) -> None:
    """Set the function that compiles the native callables (see ember.backends.llvm.eager)."""
    global _compiler
    _compiler = compiler


def hit() -> None:
    """Count one call the Python tier served that the native tier would: the last one compiles it."""
    global _countdown
    _countdown -= 1
    if _countdown <= 0:
        install()


def install() -> bool:
    """Compile and install the native tier now (once per process); whether it is in use."""
    global _countdown, status
    from ember.numpy import _eager, _indexing
    from ember.tracer.array import Array
    from ember.tracer.trace import Tracer, trace_state

    with _lock:
        _countdown = _NEVER
        if _python:
            return True
        if _compiler is None or not config.eager_native:
            status = "no compiler registered" if _compiler is None else "off (ember_eager_native)"
            return False
        helper, ref = _indexing._IndexUpdateHelper, _indexing._IndexUpdateRef
        try:
            native = _compiler({"helper": helper, "ref": ref, "array": Array, "set": ref.__dict__["set"],
                                "miss": _eager.MISS, "trace_state": trace_state})
        except Exception as e:  # noqa: BLE001 (any failure leaves the Python tier, which is complete)
            status = f"not in use: {type(e).__name__}: {e}"
            return False
        at = property(native["at"])
        for owner, name, value in [(ref, "set", native["set"]), (helper, "__getitem__", native["getitem"]),
                                   (Array, "at", at), (Tracer, "at", at), (_eager, "_whole_lane", native["whole"])]:
            _python[owner, name] = owner.__dict__[name]
            setattr(owner, name, value)
        status = "installed"
        return True


def uninstall() -> None:
    """Put the Python tier back (the native code stays loaded, unused); `hit` counts afresh."""
    global _countdown, status
    with _lock:
        for (owner, name), value in _python.items():
            setattr(owner, name, value)
        _python.clear()
        _countdown = NATIVE_AFTER if config.eager_native else _NEVER
        status = "not compiled yet" if config.eager_native else "off (ember_eager_native)"


def installed() -> bool:
    """Whether the native tier is in use."""
    return bool(_python)


config.watch("ember_eager_native", lambda _value: uninstall())
