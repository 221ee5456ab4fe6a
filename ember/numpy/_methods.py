"""NumPy-style operators and methods of Tracer and of the eager Array, forwarded to ember.numpy
(installed at import), so a traced value and a concrete one follow the same (JAX's) rules."""

from __future__ import annotations

import functools
import inspect

import numpy as np

from ember.errors import ArgumentError, ConcretizationError, user_location
from ember.numpy import _arrays, _eager, _indexing, _math, _products, _reductions, _shape, _sorting
from ember.numpy._core import arg_wrapper, to_dtype
from ember.numpy._eager import MISS, fast_path, product_method
from ember.tracer import dtypes
from ember.tracer import prims as P
from ember.tracer.array import Array
from ember.tracer.trace import Tracer, trace_state

_OPERANDS = (Tracer, np.ndarray, np.generic, bool, int, float)


def _binop(fn, reflected: bool = False):
    fast = fast_path(fn, "*")
    binary = fast.binary  # an eager Array's operators replay an earlier call of their signature

    def full(self, other):
        t = type(other)
        if not (t is float or t is Array or t is int):  # the common operands skip the isinstance checks
            if isinstance(other, (list, tuple)):  # as in JAX: no implicit conversion of sequences
                raise ArgumentError(f"{fn.__name__} of a traced array and a {t.__name__}; wrap it with "
                                    "ember.numpy.asarray(...) (or np.array(...))", user_location())
            if not isinstance(other, _OPERANDS):
                return NotImplemented
        return fn(other, self) if reflected else fn(self, other)

    # the fast path first (it takes Arrays, ndarrays and Python scalars, else says MISS): no checks before it
    if getattr(fn, "product", False) and not reflected:
        return product_method(fast, full)
    if reflected:
        def method(self, other):
            out = binary(other, self)
            return full(self, other) if out is MISS else out
    else:
        def method(self, other):
            out = binary(self, other)
            return full(self, other) if out is MISS else out
    return method


def _astype(self, dtype, copy: bool = True):
    return to_dtype(self, dtypes.canonicalize(dtype))


def _reshape(self, *shape, order: str = "C"):
    if len(shape) == 1 and not isinstance(shape[0], (int, np.integer)):
        shape = shape[0]
    return _shape.reshape(self, shape, order)


def _transpose(self, *axes):
    if len(axes) == 1 and not isinstance(axes[0], (int, np.integer)):
        axes = axes[0]
    return _shape.transpose(self, axes or None)


def _concrete_value(self, what: str) -> np.ndarray:
    """The value of a traced array whose trace knows values (grad outside jit), as JAX gives it."""
    v = self.known_value()
    if v is None:
        raise ConcretizationError(f"{what} needs the value of a traced array, which is unknown while tracing; "
                                  "return the array from the function instead", user_location())
    self._no_lost_gradient(f"Python value by {what}")
    return v


def _item(self, *args):
    return _concrete_value(self, "item()").item(*args)


def _tolist(self):
    return _concrete_value(self, "tolist()").tolist()


_METHODS = {
    "__add__": _binop(_math.add), "__radd__": _binop(_math.add, True),
    "__sub__": _binop(_math.subtract), "__rsub__": _binop(_math.subtract, True),
    "__mul__": _binop(_math.multiply), "__rmul__": _binop(_math.multiply, True),
    "__truediv__": _binop(_math.divide), "__rtruediv__": _binop(_math.divide, True),
    "__floordiv__": _binop(_math.floor_divide), "__rfloordiv__": _binop(_math.floor_divide, True),
    "__mod__": _binop(_math.remainder), "__rmod__": _binop(_math.remainder, True),
    "__divmod__": _binop(_math.divmod), "__rdivmod__": _binop(_math.divmod, True),
    "__pow__": _binop(_math.power), "__rpow__": _binop(_math.power, True),
    "__matmul__": _binop(_products.matmul), "__rmatmul__": _binop(_products.matmul, True),
    "__and__": _binop(_math.bitwise_and), "__rand__": _binop(_math.bitwise_and, True),
    "__or__": _binop(_math.bitwise_or), "__ror__": _binop(_math.bitwise_or, True),
    "__xor__": _binop(_math.bitwise_xor), "__rxor__": _binop(_math.bitwise_xor, True),
    "__lshift__": _binop(_math.left_shift), "__rlshift__": _binop(_math.left_shift, True),
    "__rshift__": _binop(_math.right_shift), "__rrshift__": _binop(_math.right_shift, True),
    "__lt__": _binop(_math.less), "__le__": _binop(_math.less_equal),
    "__gt__": _binop(_math.greater), "__ge__": _binop(_math.greater_equal),
    "__eq__": _binop(_math.equal), "__ne__": _binop(_math.not_equal),
    "__neg__": lambda self: _math.negative(self),
    "__pos__": lambda self: self,
    "__abs__": lambda self: _math.abs(self),
    "__invert__": lambda self: P.not_(self),
    "__getitem__": _indexing.getitem,
    "astype": _astype,
    "reshape": _reshape,
    "transpose": _transpose,
    "sum": _reductions.sum, "mean": _reductions.mean, "prod": _reductions.prod,
    "max": _reductions.max, "min": _reductions.min,
    "argmax": _reductions.argmax, "argmin": _reductions.argmin,
    "var": _reductions.var, "std": _reductions.std,
    "all": _reductions.all, "any": _reductions.any,
    "squeeze": _shape.squeeze, "ravel": _shape.ravel, "flatten": _shape.ravel,
    "swapaxes": _shape.swapaxes,
    "clip": _math.clip, "dot": _products.dot, "round": _math.round,
    "copy": lambda self: self, "conj": lambda self: self,
    "item": _item, "tolist": _tolist,
    "trace": _arrays.trace, "diagonal": _arrays.diagonal, "repeat": _arrays.repeat,
    "sort": _sorting.sort, "argsort": _sorting.argsort, "cumsum": _sorting.cumsum, "cumprod": _sorting.cumprod,
    "nonzero": _sorting.nonzero, "searchsorted": _sorting.searchsorted,
}

_OPERATORS = frozenset(k for k, v in _METHODS.items() if getattr(v, "__name__", "") == "method")

_PROPERTIES = {
    "T": property(lambda self: _shape.transpose(self)),
    "at": property(_indexing.at),
    "real": property(lambda self: self),
}


# the eager Array keeps NumPy's for these: its value is known, and NumPy's copy gives an Array
_NUMPY_KEEPS = ("item", "tolist", "copy", "conj")
# `x += y` rebinds x to a new array, as for a jax.Array (NumPy's would write into x)
_IN_PLACE = {"__iadd__": "__add__", "__isub__": "__sub__", "__imul__": "__mul__", "__itruediv__": "__truediv__",
             "__ifloordiv__": "__floordiv__", "__imod__": "__mod__", "__ipow__": "__pow__",
             "__imatmul__": "__matmul__", "__iand__": "__and__", "__ior__": "__or__", "__ixor__": "__xor__",
             "__ilshift__": "__lshift__", "__irshift__": "__rshift__"}


def _array_method(name: str, fn):
    """An Array method: ember.numpy's (JAX's semantics), by the eager fast path where it can; a call
    whose arguments only NumPy's method takes (`x.ravel(order="K")`, `x.sum(out=...)`, as libraries
    such as Dask make) gets NumPy's, on the data."""
    signature = inspect.signature(fn)
    numpy_method = getattr(np.ndarray, name, None)
    fast = fast_path(fn, (0,))
    unary, lanes, whole = fast.unary, fast.lanes, getattr(fn, "whole", False)

    @functools.wraps(fn)
    def method(self, *args, **kwargs):
        if args or kwargs:
            out = fast((self, *args), kwargs)
        else:  # (`x.sum()`: a whole reduction's lane first, native once the process is warm)
            out = _eager._whole_lane(self, lanes) if whole else MISS
            if out is MISS:
                out = unary(self)
        if out is not MISS:
            return out
        try:
            return fn(self, *args, **kwargs)
        except TypeError:
            if numpy_method is None or _binds(signature, self, args, kwargs):
                raise
        out = numpy_method(self.view(np.ndarray), *args, **kwargs)
        return out.view(Array) if type(out) is np.ndarray else out

    return method


def _binds(signature: inspect.Signature, self, args: tuple, kwargs: dict) -> bool:
    """Whether ember.numpy's method takes these arguments (else the TypeError was NumPy-only ones)."""
    try:
        signature.bind(self, *args, **kwargs)
    except TypeError:
        return False
    return True


# An Array's basic indexing, `.T` and `.reshape`: NumPy's own on the data, then a copy (Ember's results
# never alias), which is JAX's semantics there; a key, shape or call they do not take goes the general way.
_nd_getitem, _nd_copy, _nd_reshape, _nd_T = np.ndarray.__getitem__, np.ndarray.copy, np.ndarray.reshape, np.ndarray.T
_asarray = np.asarray


def _array_getitem(general):
    """`x[key]` for a key of ints, slices of ints, None and Ellipsis outside any trace: NumPy's basic
    indexing, copied (ints in bounds, slices clamped); any other key, or one NumPy refuses (out of
    bounds: Ember's IndexError with the user's line), by `general`."""
    static_key = _indexing.static_key

    def __getitem__(self, key):
        t = type(key)
        if t is slice:  # (the commonest after an int: its parts tested here, without static_key's tuple)
            a, b, c = key.start, key.stop, key.step
            basic = (a is None or type(a) is int) and (b is None or type(b) is int) and (c is None or type(c) is int)
        else:
            basic = t is int or key is None or key is Ellipsis or (t is tuple and static_key(key) is not None)
        if basic and not trace_state.stack:
            try:
                out = _nd_getitem(self, key)
            except (IndexError, ValueError, TypeError):
                return general(self, key)
            return _nd_copy(out) if out.__class__ is Array else _asarray(out).view(Array)
        return general(self, key)

    return __getitem__


def _array_reshape(general):
    """`x.reshape(shape)` in C order with int sizes outside any trace: NumPy's reshape, copied; any other
    call by `general` (its errors included)."""

    def reshape(self, *shape, order: str = "C"):
        if order == "C" and not trace_state.stack:
            s = shape[0] if len(shape) == 1 and type(shape[0]) is tuple else shape
            for d in s:
                if type(d) is not int:
                    break
            else:
                try:
                    return _nd_copy(_nd_reshape(self, s))
                except (ValueError, TypeError):
                    pass
        return general(self, *shape, order=order)

    return reshape


def _array_astype(general):
    """`x.astype(dtype)` outside any trace: NumPy's astype, which is what convert_element_type's eager
    rule runs (itself for the same dtype: an Array is immutable); traced, or a bad dtype, by `general`."""
    canonicalize, nd_astype = dtypes.canonicalize, np.ndarray.astype

    def astype(self, dtype, copy: bool = True):
        if not trace_state.stack:
            try:
                dt = canonicalize(dtype)
            except Exception:  # noqa: BLE001 (the general path raises it with the user's line)
                return general(self, dtype, copy)
            return self if dt == self.dtype else nd_astype(self, dt)
        return general(self, dtype, copy)

    return astype


def _array_T(self):
    """`x.T`: NumPy's transpose of the data, copied in C order (traced: ember.numpy's transpose)."""
    return _shape.transpose(self) if trace_state.stack else _nd_copy(_nd_T.__get__(self))


def install() -> None:
    for name, fn in _METHODS.items():
        setattr(Tracer, name, fn)
        if name not in _NUMPY_KEEPS:
            # (an operator has its fast path already; _array_method gives the others theirs)
            setattr(Array, name, fn if name in _OPERATORS else _array_method(name, fn))
    for name, prop in _PROPERTIES.items():
        setattr(Tracer, name, prop)
        setattr(Array, name, prop)
    # NumPy's own where it is JAX's (above), each in front of the general method (whose name and doc it keeps)
    for name, fast in (("__getitem__", _array_getitem), ("reshape", _array_reshape), ("astype", _array_astype),
                       ("argmax", functools.partial(arg_wrapper, np.ndarray.argmax)),
                       ("argmin", functools.partial(arg_wrapper, np.ndarray.argmin))):
        general = getattr(Array, name)
        setattr(Array, name, functools.wraps(general)(fast(general)))
    Array.T = property(_array_T)
    for name, op in _IN_PLACE.items():
        if op in _METHODS:
            setattr(Array, name, _METHODS[op])
    Tracer.__hash__ = None  # arrays compare elementwise, so they are unhashable (as in JAX/NumPy)
