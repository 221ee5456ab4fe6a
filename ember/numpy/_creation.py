"""Array creation: array, zeros, ones, full, *_like, arange, linspace, eye. New arrays default to
float32 (int32 for integer ranges), as in JAX. Inside a trace they become nodes, not big constants.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from ember.errors import ConcretizationError, user_location
from ember.numpy._core import asarray, broadcast_shapes, dtype_weak, is_scalar, normalize_axis, shape_of, to_dtype
from ember.tracer import dtypes
from ember.tracer import prims as P
from ember.tracer.array import Array
from ember.tracer.trace import Tracer, is_tracing, trace_state

_np_zeros, _np_empty, _np_arange = np.zeros, np.empty, np.arange
_INT32 = 2**31


def array(object, dtype=None, copy: bool = True):
    """An array from `object` (nested lists may hold traced values); copies NumPy input by default."""
    out = asarray(object, dtype)
    if copy and isinstance(out, np.ndarray) and out is object:
        out = out.copy()
    return out


_STATIC_HINT = ("Pass the size as a static argument: jit(f, static_argnums=...) or jit(f, static_argnames=...) "
                "(under grad or vmap, bind it first with functools.partial(f, n=...))")


def _known(x):
    """A traced scalar as its value where its trace knows values (grad outside jit), else itself."""
    if isinstance(x, Tracer) and x.known_value() is not None and not x.differentiated():
        return x.known_value().item()
    return x


def _shape(shape, name: str) -> tuple[int, ...]:
    """`shape` (an int or a sequence of ints) as a tuple; traced sizes cannot fix a shape."""
    shape = [_known(d) for d in shape] if isinstance(shape, (list, tuple)) else _known(shape)
    if isinstance(shape, Tracer) or (isinstance(shape, (list, tuple)) and any(isinstance(d, Tracer) for d in shape)):
        raise ConcretizationError(f"{name}: the shape must be concrete Python ints, not traced values (array "
                                  f"shapes are fixed when a function is traced). {_STATIC_HINT}", user_location())
    if isinstance(shape, (int, np.integer)) and not isinstance(shape, bool):
        return (int(shape),)
    if isinstance(shape, (list, tuple)) and all(isinstance(d, (int, np.integer)) for d in shape):
        return tuple(int(d) for d in shape)
    raise TypeError(f"{name}: shape must be an int or a sequence of ints, got {shape!r} (at {user_location()})")


def _eager_shape(shape) -> tuple[int, ...] | None:
    """`shape` as a tuple when it is a plain one (a non-negative int, or a tuple of them) and no trace is
    under way: the creation functions then make the array with NumPy directly (their eager fast path)."""
    if trace_state.stack:
        return None
    t = type(shape)
    if t is int:
        return (shape,) if shape >= 0 else None
    if t is not tuple:
        return None
    for d in shape:  # (a loop: a generator costs more than the array)
        if type(d) is not int or d < 0:
            return None
    return shape


def full(shape, fill_value, dtype=None):
    """An array of `shape` filled with `fill_value` (which may be a traced scalar or broadcast)."""
    dt, weak = (dtypes.canonicalize(dtype), False) if dtype is not None else dtype_weak(fill_value)
    s = _eager_shape(shape)
    if s is not None and type(fill_value) in _FILLS.get(dt.kind, ()):
        return _filled(s, fill_value, dt)
    return _full(_shape(shape, "full"), fill_value, dt, weak)


# the Python scalars that NumPy's fill puts into an array of each kind as the full path converts them
_FILLS = {"f": (float, int, bool), "i": (int, bool), "u": (bool,), "b": (bool,)}


def _filled(shape: tuple[int, ...], value, dt: np.dtype):
    """A new Array of `shape` and `dt` filled with a Python scalar, or the full path's result where NumPy
    refuses the value (an int out of the dtype's range)."""
    out = _np_empty(shape, dt)
    try:
        out.fill(value)
    except (OverflowError, ValueError):
        return _full(shape, value, dt, False)
    return out.view(Array)


def _full(shape, fill_value, dt, weak: bool):
    """`fill_value` as (dt, weak) broadcast to `shape`: weak for a Python scalar or a weak value, as jnp.full."""
    if is_scalar(fill_value):
        return P.full(shape, fill_value, dt, weak)
    return P.broadcast_to(to_dtype(asarray(fill_value), dt, weak), shape)


def zeros(shape, dtype=None):
    """An array of zeros (float32 unless `dtype` says otherwise)."""
    dt = dtypes.canonicalize(dtype) if dtype is not None else dtypes.float_
    s = _eager_shape(shape)
    return _np_zeros(s, dt).view(Array) if s is not None else P.full(_shape(shape, "zeros"), 0, dt)


def ones(shape, dtype=None):
    """An array of ones (float32 unless `dtype` says otherwise)."""
    dt = dtypes.canonicalize(dtype) if dtype is not None else dtypes.float_
    s = _eager_shape(shape)
    return _filled(s, True, dt) if s is not None else P.full(_shape(shape, "ones"), 1, dt)


empty = zeros
for _fn in (full, zeros, ones):
    _fn.gives_arrays = True  # (Arrays on the eager path, bind's Arrays or Tracers otherwise: no wrapper)


def _like(a, dtype, shape, name):
    """(dtype, weak, shape) of a *_like result: `a`'s dtype and weak type unless `dtype` is given (JAX)."""
    a = asarray(a) if isinstance(a, (list, tuple)) else a
    dt, weak = (dtypes.canonicalize(dtype), False) if dtype is not None else dtype_weak(a)
    return dt, weak, (_shape(shape, name) if shape is not None else shape_of(a))


def zeros_like(a, dtype=None, shape=None):
    """Zeros with the shape and dtype of `a` (or the given ones)."""
    dt, weak, s = _like(a, dtype, shape, "zeros_like")
    return P.full(s, 0, dt, weak)


def ones_like(a, dtype=None, shape=None):
    """Ones with the shape and dtype of `a` (or the given ones)."""
    dt, weak, s = _like(a, dtype, shape, "ones_like")
    return P.full(s, 1, dt, weak)


def full_like(a, fill_value, dtype=None, shape=None):
    """`fill_value` with the shape and dtype of `a` (or the given ones)."""
    dt, weak, s = _like(a, dtype, shape, "full_like")
    return _full(s, fill_value, dt, weak)


empty_like = zeros_like


def _static_number(x, name: str, arg: str):
    x = _known(x)
    if isinstance(x, Tracer):
        raise ConcretizationError(f"{name}: `{arg}` must be a concrete Python number, not a traced value "
                                  f"(array shapes are fixed when a function is traced). {_STATIC_HINT}",
                                  user_location())
    return x


def arange(start, stop=None, step=None, dtype=None):
    """Evenly spaced values in [start, stop); integers default to int32 and floats to float32."""
    if dtype is None and type(start) is int and (stop is None or type(stop) is int) and (
            step is None or type(step) is int) and step != 0 and not trace_state.stack:
        if stop is None:
            start, stop = 0, start
        if -_INT32 <= start < _INT32 and -_INT32 <= stop < _INT32:  # (ints: NumPy's arange is exact)
            return _np_arange(start, stop, step or 1, dtype=dtypes.int_).view(Array)
    start, stop, step = (_static_number(v, "arange", n) for v, n in ((start, "start"), (stop, "stop"),
                                                                     (step, "step")))
    if stop is None:
        start, stop = 0, start
    step = 1 if step is None else step
    if dtype is None:
        is_int = all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in (start, stop, step))
        dt = dtypes.int_ if is_int else dtypes.float_
    else:
        dt = dtypes.canonicalize(dtype)
    if step == 0:
        raise ValueError("arange: step must not be zero")
    n = max(0, math.ceil((stop - start) / step))
    if not is_tracing():
        return np.arange(start, stop, step).astype(dt)[:n].view(Array)
    out = P.iota(dt if not dtypes.is_bool(dt) else dtypes.int_, (n,), 0)
    if step != 1:
        out = P.mul(out, step)
    if start != 0:
        out = P.add(out, start)
    return P.convert_element_type(out, dt)


def linspace(start, stop, num: int = 50, endpoint: bool = True, dtype=None, axis: int = 0):
    """`num` evenly spaced values from start to stop, as jax.numpy.linspace: the bounds may be traced
    or arrays (their values run along `axis`); integer dtypes take the floor."""
    num = int(_static_number(num, "linspace", "num"))
    if num < 0:
        raise ValueError(f"linspace: num must be non-negative, got {num}")
    dt = dtypes.canonicalize(dtype) if dtype is not None else dtypes.result_type(
        dtype_weak(start), dtype_weak(stop), (dtypes.float_, True))[0]
    ct = dt if dtypes.is_float(dt) else dtypes.float_
    start, stop = to_dtype(asarray(start), ct), to_dtype(asarray(stop), ct)
    bounds = broadcast_shapes(shape_of(start), shape_of(stop), name="linspace")
    axis = normalize_axis(axis, len(bounds) + 1, "linspace")
    col = bounds[:axis] + (1,) + bounds[axis:]
    start, stop = (P.reshape(P.broadcast_to(b, bounds), col) for b in (start, stop))
    div = num - 1 if endpoint else num
    if num == 0 or num == 1:
        out = P.broadcast_to(start, bounds[:axis] + (num,) + bounds[axis:])
    else:
        shape = bounds[:axis] + (div,) + bounds[axis:]
        steps = P.div(P.iota(ct, shape, axis), np.asarray(div, ct))
        first = P.broadcast_to(start, shape)
        out = P.add(first, P.mul(steps, P.sub(P.broadcast_to(stop, shape), first)))
        out = P.concatenate([out, stop], axis) if endpoint else out
    out = out if dtypes.is_float(dt) else P.floor(out)
    return out if out.dtype == dt else P.convert_element_type(out, dt)


def _replayed(fn, operands: tuple[int, ...]):
    """`fn` with the eager fast path of ember.numpy's array functions (ember/numpy/_eager.py): outside a
    trace, a call replays an earlier call of its signature (`operands`' types and shapes, every other
    argument's value) instead of binding its primitives one by one (linspace: a dozen of them)."""
    from ember.numpy._eager import MISS, fast_path

    fast = fast_path(fn, operands)

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        out = MISS if trace_state.stack else fast(args, kwargs)
        return fn(*args, **kwargs) if out is MISS else out

    wrapper.fast = fast
    return wrapper


linspace = _replayed(linspace, (0, 1))
arange.gives_arrays = True  # (an Array eagerly, a Tracer traced: no arrays_out wrapper)


def eye(N: int, M: int | None = None, k: int = 0, dtype=None):
    """Ones on the k-th diagonal of an N x M matrix."""
    M = N if M is None else M
    dt = dtypes.canonicalize(dtype) if dtype is not None else dtypes.float_
    if not is_tracing():
        return np.eye(N, M, k, dtype=dt)
    rows = P.iota(dtypes.int_, (N, M), 0)
    cols = P.iota(dtypes.int_, (N, M), 1)
    return P.convert_element_type(P.eq(P.add(rows, k) if k else rows, cols), dt)


def identity(n: int, dtype=None):
    return eye(n, dtype=dtype)


class _ScalarTypeMeta(type):
    """The metaclass of `ember.numpy.float32` and the other dtype constructors: called, it casts (as
    jnp.float32(x) does: `astype` on a traced value, a 0-d or n-d array of that dtype on a concrete one);
    used as a dtype, it is its NumPy scalar type (np.dtype(), ==, hash, isinstance all agree)."""

    def __call__(cls, x=0):
        return asarray(x, cls.dtype)

    def __eq__(cls, other):
        return other is cls or other is cls.type or (isinstance(other, np.dtype) and other == cls.dtype)

    def __hash__(cls):
        return hash(cls.type)

    def __instancecheck__(cls, instance) -> bool:
        return isinstance(instance, cls.type)

    def __repr__(cls):
        return f"ember.numpy.{cls.__name__}"


def scalar_type(np_type: type) -> type:
    """The ember.numpy counterpart of a NumPy scalar type (np.float32 -> ember.numpy.float32)."""
    name = np.dtype(np_type).name if np_type is not np.bool_ else "bool_"
    doc = f"Cast to {np.dtype(np_type).name} (an array of that dtype), or use as the dtype."
    return _ScalarTypeMeta(name, (), {"dtype": np.dtype(np_type), "type": np_type, "__doc__": doc})
