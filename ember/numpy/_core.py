"""What every ember.numpy function does first: turn operands into arrays, promote dtypes (weak
Python scalars included) and broadcast shapes, raising errors that name the function and the user's
line.
"""

from __future__ import annotations

import functools
import inspect
import types
from collections.abc import Callable, MutableMapping, Sequence

import numpy as np

from ember.errors import (
    ArgumentError,
    ArgumentValueError,
    AxisError,
    IncompatibleShapesError,
    ShapeError,
    user_location,
)
from ember.tracer import dtypes
from ember.tracer import prims as P
from ember.tracer.array import Array
from ember.tracer.ir import Literal
from ember.tracer.prims.util import PY_SCALARS as _SCALARS
from ember.tracer.prims.util import is_python_scalar as _is_python_scalar
from ember.tracer.prims.util import shape_of  # noqa: F401  (ember.numpy's modules import it from here)
from ember.tracer.trace import Tracer, is_tracing, stage_const, trace_state

ArrayLike = Tracer | np.ndarray


def is_scalar(x) -> bool:
    return isinstance(x, _SCALARS) or isinstance(x, np.generic)


def dtype_weak(x) -> tuple[np.dtype, bool]:
    """(dtype, weak) of an operand: Python scalars are weak, everything else strong."""
    if isinstance(x, (Tracer, Literal)):
        return x.aval.dtype, x.aval.weak_type
    if isinstance(x, (np.ndarray, np.generic)):
        return dtypes.canonicalize(x.dtype), False
    if isinstance(x, _SCALARS):
        return dtypes.scalar_dtype(x)
    x = asarray(x)
    return dtype_weak(x)


def _list_dtype(x) -> np.dtype | None:
    """Default dtype of a nested list of Python scalars (float32/int32/bool), None if it holds
    anything else (arrays, NumPy scalars, traced values)."""
    kind = -1
    for y in x:  # a flat list of Python scalars, the commonest, without the general walk's set and stack
        t = type(y)
        k = 2 if t is float else 1 if t is int else 0 if t is bool else -2
        if k == -2:
            break
        if k > kind:
            kind = k
    else:
        return dtypes.float_ if kind in (-1, 2) else dtypes.int_ if kind == 1 else dtypes.bool_
    kinds = set()
    stack = [x]
    while stack:
        y = stack.pop()
        if isinstance(y, (list, tuple)):
            stack.extend(y)
        elif isinstance(y, np.generic):  # np.float64 is a float, but a strong one
            return None
        elif isinstance(y, bool):
            kinds.add(0)
        elif isinstance(y, int):
            kinds.add(1)
        elif isinstance(y, float):
            kinds.add(2)
        else:
            return None
    return {0: dtypes.bool_, 1: dtypes.int_, 2: dtypes.float_}[max(kinds)] if kinds else dtypes.float_


def _from_sequence(x, want):
    """A (nested) list that holds arrays or traced values, stacked; its Python scalars are weak, so
    [x_f32, 2] is float32."""
    from ember.numpy._shape import stack

    items = [asarray(y, want) if isinstance(y, (list, tuple)) else y for y in x]
    target = want or dtypes.result_type(*(dtype_weak(y) for y in items))[0]
    if not any(isinstance(y, Tracer) for y in items):
        return np.array(items, dtype=target)
    return stack([asarray(to_dtype(y, target)) for y in items])


def asarray(x, dtype=None) -> ArrayLike:
    """`x` as an array (a Tracer while tracing, else a NumPy array), optionally converted to `dtype`.

    Python scalars and lists of them default to float32/int32/bool, as in JAX.
    """
    want = dtypes.canonicalize(dtype) if dtype is not None else None
    if isinstance(x, Tracer):
        return x if want is None else P.convert_element_type(x, want)
    if isinstance(x, np.ndarray):
        arr = plain_array(x)
    elif isinstance(x, (list, tuple)):
        default = _list_dtype(x)
        if default is None:
            return _from_sequence(x, want)
        arr = np.array(x, dtype=want or default)  # (a dtype of Ember's: nothing to canonicalize)
        return stage_const(arr) if arr.ndim and is_tracing() else arr
    elif isinstance(x, _SCALARS):
        arr = np.asarray(x, dtype=want or dtypes.scalar_dtype(x)[0])
    elif isinstance(x, np.generic):
        arr = np.asarray(x)
    elif hasattr(x, "__array__"):
        arr = np.asarray(x)
    elif isinstance(x, complex):
        dtypes.scalar_dtype(x)  # raises the DTypeError that names complex numbers
    else:
        raise TypeError(f"cannot convert {type(x).__name__} to an array (at {user_location()})")
    target = want or dtypes.canonicalize(arr.dtype)
    arr = arr if arr.dtype == target else arr.astype(target)
    # While tracing, an array is a value of the graph (a const), as jnp.asarray gives a jax Array: it
    # takes traced indices and `.at[]`.
    return stage_const(arr) if arr.ndim and is_tracing() else arr


def plain_array(x: np.ndarray) -> np.ndarray:
    """`x` as a plain ndarray: NumPy subclasses such as np.matrix would keep their own rules (2-D results
    of sum and indexing); masked arrays are rejected, since their mask would be silently dropped.
    Byte-swapped data (a big-endian file's) is copied into this machine's order, as JAX's device_put does."""
    if type(x) is np.ndarray:
        return x if x.dtype.isnative else _native_order(x)
    if type(x) is Array:  # ember's own: its data, which the functions below work on as NumPy's
        return x.view(np.ndarray) if x.dtype.isnative else _native_order(x.view(np.ndarray))
    if isinstance(x, np.ma.MaskedArray):
        raise ArgumentValueError("NumPy masked arrays are not supported by ember, which would drop the mask; "
                                 "pass arr.filled(value) (or the data and the mask as two arrays) instead",
                                 user_location())
    x = np.asarray(x)
    return x if x.dtype.isnative else _native_order(x)


def _native_order(x: np.ndarray) -> np.ndarray:
    """A copy of byte-swapped `x` in this machine's byte order (the same values and dtype kind)."""
    return x.astype(x.dtype.newbyteorder("="))


# --- operands of the public functions -------------------------------------------------------------

# Which positional parameters of each public ember.numpy function are arrays ("*": all of them, "seq":
# the first is a sequence of arrays). As in jax.numpy, a list there is an error rather than an implicit
# conversion, which would hide a costly copy (and a Python loop) in every call.
_ALL, _SEQ = "*", "seq"
ARRAY_PARAMS: dict[str, tuple[int, ...] | str] = {
    **dict.fromkeys(["abs", "absolute", "add", "around", "bitwise_and", "bitwise_or", "ceil", "clip", "cos",
                     "divide", "divmod", "equal", "exp", "expm1", "floor", "floor_divide", "fmod", "greater",
                     "greater_equal", "isfinite", "isinf", "isnan", "less", "less_equal", "log", "log1p", "log2",
                     "log10", "logical_and", "logical_not", "logical_or", "logical_xor", "maximum", "minimum",
                     "mod", "multiply", "negative", "not_equal", "positive", "power", "reciprocal", "remainder",
                     "round", "sign", "sin", "sqrt", "square", "subtract", "tanh", "true_divide", "where",
                     "einsum", "atleast_1d", "atleast_2d", "broadcast_arrays",
                     "tan", "arctan", "atan", "arcsin", "asin", "arccos", "acos", "arctan2", "atan2", "sinh", "cosh",
                     "arcsinh", "asinh", "arccosh", "acosh", "arctanh", "atanh",
                     "cbrt", "copysign", "exp2", "hypot", "logaddexp", "logaddexp2", "nextafter",
                     "bitwise_xor", "bitwise_not", "invert", "bitwise_invert", "left_shift", "right_shift",
                     "bitwise_left_shift", "bitwise_right_shift", "bitwise_count"], _ALL),
    **dict.fromkeys(["all", "amax", "amin", "any", "argmax", "argmin", "max", "mean", "min", "prod", "std",
                     "sum", "var", "broadcast_to", "expand_dims", "flip", "moveaxis", "ravel", "reshape",
                     "squeeze", "swapaxes", "transpose", "split", "empty_like", "ones_like", "zeros_like",
                     "norm"], (0,)),
    **dict.fromkeys(["dot", "inner", "matmul", "outer", "tensordot", "vdot", "take", "full_like"], (0, 1)),
    **dict.fromkeys(["convolve", "correlate"], (0, 1)),
    **dict.fromkeys(["concatenate", "stack", "hstack", "vstack"], _SEQ),
    # _arrays.py, _stats.py, _numeric.py
    **dict.fromkeys(["tril", "triu", "diag", "diagonal", "diagflat", "trace", "tile", "repeat", "roll", "rot90",
                     "diff", "ediff1d", "pad", "nansum", "nanprod", "nanmax", "nanmin", "nanargmax", "nanargmin",
                     "nanmean", "nanvar", "nanstd", "average", "cov", "corrcoef", "bincount", "histogram",
                     "histogram_bin_edges"], (0,)),
    **dict.fromkeys(["kron", "cross", "take_along_axis", "put_along_axis", "isclose", "allclose", "array_equal",
                     "array_equiv", "polyval", "polyadd", "polysub", "histogram2d"], (0, 1)),
    **dict.fromkeys(["interp"], (0, 1, 2)),
    "vander": (0,),
    **dict.fromkeys(["polyfit", "polydiv", "polymul"], (0, 1)),
    **dict.fromkeys(["meshgrid", "gradient"], _ALL),
    # scans, sorts and what is built on them (_sorting.py)
    **dict.fromkeys(["argpartition", "argsort", "argwhere", "cumprod", "cumsum", "cumulative_prod", "cumulative_sum",
                     "flatnonzero", "median", "nancumprod", "nancumsum", "nanmedian", "nonzero", "partition", "sort",
                     "unique", "unique_all", "unique_counts", "unique_inverse", "unique_values"], (0,)),
    **dict.fromkeys(["digitize", "nanpercentile", "nanquantile", "percentile", "quantile", "searchsorted"],
                    (0, 1)),
    "lexsort": _SEQ,
    **dict.fromkeys(["cholesky", "det", "inv", "matrix_power", "slogdet"], (0,)),  # ember.numpy.linalg
    **dict.fromkeys(["qr", "eigh", "eigvalsh", "svd", "svdvals", "pinv", "matrix_rank", "cond"], (0,)),
    "solve": (0, 1),
    "lstsq": (0, 1),
    **dict.fromkeys(["matrix_norm", "vector_norm", "tensorinv"], (0,)),
    "tensorsolve": (0, 1),
    "multi_dot": _SEQ,
}


def _check_operand(x, name: str, position: int):
    if isinstance(x, (list, tuple)):
        raise ArgumentError(f"{name} requires arrays or scalars, got a {type(x).__name__} at position "
                            f"{position}; wrap it with ember.numpy.asarray(...) (or np.array(...))",
                            user_location())
    return plain_array(x) if isinstance(x, np.ndarray) else x


# functions whose eager path checks an operand's values (take's indices raise IndexError out of bounds):
# the fast path replays only these operands, the others take the full path (as arguments it cannot key)
_REPLAYED_OPERANDS = {"take": (0,)}


def _checked(fn: Callable, name: str, params) -> Callable:
    """`fn` with its array parameters checked: no lists, no masked arrays, NumPy subclasses made plain;
    concrete calls outside a trace take the eager fast path (ember/numpy/_eager.py) where they can."""
    from ember.numpy._eager import MISS, fast_path, product_method, whole_wrapper

    if "<locals>" in getattr(fn, "__qualname__", ""):  # a factory's function (or a decorator's wrapper):
        fn.__qualname__ = name  # a call missing an argument says "cumsum() missing ...", as JAX's does
    fast = None if params == _SEQ else fast_path(fn, _REPLAYED_OPERANDS.get(name, params))

    def full(*args, **kwargs):
        if params == _SEQ:
            if args and not isinstance(args[0], (np.ndarray, Tracer)):
                args = ([_check_operand(x, name, 0) for x in args[0]],) + args[1:]
        else:
            picks = range(len(args)) if params == _ALL else params
            args = list(args)
            for i in picks:
                if i < len(args):
                    args[i] = _check_operand(args[i], name, i)
        out = fn(*args, **kwargs)
        # a plain ndarray here is an operand given back unchanged: a copy, so results never alias inputs
        return np.array(out).view(Array) if type(out) is np.ndarray else out

    wrapper = _seq_wrapper(_SEQ_NUMPY[name], full) if name in _SEQ_NUMPY else None
    wrapper = wrapper or _elementwise_wrapper(fn, fast, full, MISS)
    if wrapper is None and fast is not None and getattr(fn, "whole", False):
        wrapper = whole_wrapper(fast, full)
    if wrapper is None and fast is not None and getattr(fn, "product", False):
        product = product_method(fast, full)  # (an Array's @: the product lane in its own frame)

        def wrapper(*args, **kwargs):
            return product(*args) if len(args) == 2 and not kwargs else full(*args, **kwargs)
    if wrapper is None:
        unary = None if fast is None else fast.unary

        def wrapper(*args, **kwargs):
            if fast is not None:
                out = unary(args[0]) if len(args) == 1 and not kwargs else fast(args, kwargs)
                if out is not MISS:
                    return out
            return full(*args, **kwargs)

    if name == "where":
        wrapper = _where_wrapper(wrapper)
    if name in ("argmax", "argmin"):
        wrapper = arg_wrapper(getattr(np.ndarray, name), wrapper)
    wrapper = functools.wraps(fn)(wrapper)
    wrapper.fast = fast
    return wrapper


# the functions of a sequence of arrays that NumPy's own computes as JAX does when the arrays share a dtype
_SEQ_NUMPY = {"concatenate": np.concatenate, "stack": np.stack, "hstack": np.hstack, "vstack": np.vstack}


def _seq_wrapper(numpy_fn: Callable, full: Callable) -> Callable:
    """A function of a list or tuple of arrays (and an int axis where it takes one) whose arrays, outside
    any trace, are all Arrays or ndarrays of one dtype: NumPy's own, a new array (no promotion to do);
    any other call, or one NumPy refuses, takes `full` (Ember's checks, JAX's promotion and errors)."""

    def wrapper(*args, **kwargs):
        n = len(args)
        if n and n <= 2 and not trace_state.stack and (not kwargs or (n == 1 and kwargs.keys() == {"axis"})):
            seq = args[0]
            ts = type(seq)
            if (ts is list or ts is tuple) and seq:
                dt = getattr(seq[0], "dtype", None)
                plain = []
                for a in seq:
                    t = type(a)
                    if (t is not Array and t is not np.ndarray) or a.dtype is not dt:
                        break
                    plain.append(a.view(np.ndarray) if t is Array else a)
                else:
                    try:
                        out = numpy_fn(plain, *args[1:], **kwargs) if dt.isnative else None
                    except (ValueError, TypeError, IndexError):  # (shapes, axes: the full path's errors)
                        out = None
                    if out is not None:
                        return out.view(Array)
        return full(*args, **kwargs)

    return wrapper


def arg_wrapper(nd_method: Callable, general: Callable) -> Callable:
    """argmax/argmin of one non-empty array alone outside any trace (the function, or an Array's method
    without arguments): ndarray's own C method, the index in Ember's int dtype, which is what the
    primitive's eager rule computes; any other call by `general`."""

    def wrapper(*args, **kwargs):
        if len(args) == 1 and not kwargs and not trace_state.stack:
            a = args[0]
            t = type(a)
            if (t is Array or t is np.ndarray) and a.size and a.dtype.isnative:
                return np.asarray(nd_method(a), dtypes.int_).view(Array)
        return general(*args, **kwargs)

    return wrapper


def _where_wrapper(general: Callable) -> Callable:
    """where(c, x, y) of three arrays outside any trace, c boolean and x, y of one dtype: NumPy's where
    (nothing to promote, and NumPy broadcasts as JAX does); any other call by `general`."""
    # NumPy's C where without its __array_function__ dispatch (an Array's would send it back here as
    # plain views, three of them): it reads Arrays as ndarrays and gives a new plain ndarray
    np_where, boolean = getattr(np.where, "_implementation", None), np.dtype(np.bool_)

    def wrapper(*args, **kwargs):
        if len(args) == 3 and not kwargs and np_where is not None and not trace_state.stack:
            c, x, y = args
            tc, tx, ty = type(c), type(x), type(y)
            if (tc is Array or tc is np.ndarray) and (tx is Array or tx is np.ndarray) and (
                    ty is Array or ty is np.ndarray) and c.dtype is boolean and x.dtype is y.dtype and x.dtype.isnative:
                try:
                    return np_where(c, x, y).view(Array)
                except ValueError:  # shapes that do not broadcast: the general path raises JAX's error
                    pass
        return general(*args, **kwargs)

    return wrapper


def _elementwise_wrapper(fn: Callable, fast, full: Callable, miss) -> Callable | None:
    """For an elementwise function of one operand `x` or two `x1, x2`, a wrapper of exactly that
    signature: packing `*args, **kwargs` costs as much as the rest of its eager fast path's Python."""
    names = tuple(inspect.signature(fn).parameters)
    if not getattr(fn, "elementwise", False) or names not in (("x",), ("x1", "x2")):
        return None
    unary, binary = fast.unary, fast.binary
    if names == ("x",):
        def wrapper(x):
            out = unary(x)
            return full(x) if out is miss else out
    else:
        def wrapper(x1, x2):
            out = binary(x1, x2)
            return full(x1, x2) if out is miss else out
    return wrapper


def _as_arrays(out, args: tuple):
    """A function's result with its plain ndarrays as Arrays; one that may share memory with an array
    argument (its owner may write it) is copied first."""
    if type(out) is np.ndarray:
        if any(isinstance(a, np.ndarray) and np.may_share_memory(out, a) for a in args):
            out = out.copy()
        return out.view(Array)
    if type(out) in (tuple, list) and any(type(o) is np.ndarray for o in out):
        return type(out)(_as_arrays(o, args) for o in out)
    return out


def arrays_out(namespace: MutableMapping[str, object], names) -> None:
    """Make the public functions `names` of `namespace` that compute with NumPy outside a trace (e.g.
    arange) return Arrays, as every ember.numpy function does (those marked `gives_arrays` do already)."""
    for name in names:
        fn = namespace.get(name)
        if isinstance(fn, types.FunctionType) and name not in ARRAY_PARAMS and not hasattr(fn, "fast") \
                and not getattr(fn, "gives_arrays", False):
            namespace[name] = functools.wraps(fn)(lambda *a, _fn=fn, **k: _as_arrays(_fn(*a, **k), a))


def check_operands(namespace: MutableMapping[str, object]) -> None:
    """Replace the public functions in `namespace` (a module's globals) named in ARRAY_PARAMS by their
    checked versions."""
    for name, params in ARRAY_PARAMS.items():
        fn = namespace.get(name)
        if callable(fn):
            namespace[name] = _checked(fn, name, params)


def promote(*xs, name: str = "op") -> list:
    """Operands converted to their common dtype and weak type (JAX's result_type): Python scalars
    become weak Literals of it, so `x_i32 * 0.5` is a weak float32 as in JAX."""
    xs = [asarray(x) if isinstance(x, (list, tuple)) else x for x in xs]
    target, weak = dtypes.result_type(*(dtype_weak(x) for x in xs))
    return [to_result_type(x, target, weak) for x in xs]


def to_result_type(x, dtype: np.dtype, weak: bool):
    """An operand as the promoted (dtype, weak). A traced value of `dtype` is kept: a result is weak
    only if all operands are, so its weak type cannot matter (and promotion never asks a strong one
    to become weak), and no conversion node is staged for it."""
    if isinstance(x, Tracer) and x.dtype == dtype:
        return x
    return to_dtype(x, dtype, weak)


def to_dtype(x, dtype: np.dtype, weak: bool = False):
    """`x` as `dtype`, weakly typed if `weak` (a traced value only: NumPy values are strong, and a
    Python scalar asked to stay weak becomes a weak Literal for a primitive to take)."""
    if _is_python_scalar(x) and weak:
        return Literal(x, dtype, weak_type=True)
    if isinstance(x, Literal):
        return x if (x.aval.dtype, x.aval.weak_type) == (dtype, weak) else Literal(x.value, dtype, weak)
    if isinstance(x, _SCALARS):
        try:
            return np.asarray(x, dtype=dtype)[()]
        except OverflowError:  # a Python int out of the dtype's range wraps around, as in JAX
            return dtypes.wrap_python_int(x, dtype)
    if isinstance(x, np.generic):
        return x if x.dtype == dtype else np.asarray(x, dtype=dtype)[()]
    if isinstance(x, (list, tuple)):
        x = asarray(x)
    if x.dtype == dtype and getattr(x, "weak_type", weak) == weak:
        return x  # (a NumPy array has no weak type to change)
    return P.convert_element_type(x, dtype, weak)


def broadcast_shapes(*shapes: Sequence[int], name: str = "broadcast") -> tuple[int, ...]:
    """NumPy's broadcasting of shapes, with an error that names the operation and shapes."""
    nd = max((len(s) for s in shapes), default=0)
    out = []
    for i in range(nd):
        size = 1
        for s in shapes:
            d = s[i - nd + len(s)] if i - nd + len(s) >= 0 else 1
            if d != 1:
                if size != 1 and d != size:
                    shown = " and ".join(str(tuple(s)) for s in shapes)
                    raise IncompatibleShapesError(f"{name}: shapes {shown} cannot be broadcast together "
                                     f"(axis {i - nd} has sizes {size} and {d})", user_location())
                size = d
        out.append(size)
    return tuple(out)


def broadcast_to_shape(x, shape: tuple[int, ...]):
    """Broadcast `x` to `shape` unless it is 0-d (elementwise primitives broadcast scalars)."""
    s = shape_of(x)
    if s == shape or len(s) == 0:
        return x
    return P.broadcast_to(x, shape)


def elementwise(prim_fn, name: str, *xs, to_float: bool = False):
    """Promote (to JAX's dtype and weak type), optionally convert integers to the default float,
    broadcast and apply `prim_fn`."""
    xs = [asarray(x) if isinstance(x, (list, tuple)) else x for x in xs]
    target, weak = dtypes.result_type(*(dtype_weak(x) for x in xs))
    if to_float:
        target = dtypes.default_float_for(target)
    # Python scalars stay weak Literals (a weak value times 2 is still weak); a converted operand
    # takes the result's weak type, so `x_i32 * 0.5` is weak, as in JAX.
    try:
        xs = [Literal(x, target, weak_type=True) if _is_python_scalar(x) else to_result_type(x, target, weak)
              for x in xs]
    except OverflowError as e:  # a Python int beyond 64 bits: say which operation it was given to
        raise OverflowError(f"{name}: {e}") from None
    if len(xs) > 1:
        shapes = [shape_of(x) for x in xs]
        try:
            shape = broadcast_shapes(*shapes, name=name)
        except IncompatibleShapesError as e:
            # As jax.numpy: operands of one rank go to the primitive's shape check (a TypeError); only
            # ranks that need promoting meet broadcast_shapes (a ValueError).
            if len({len(s) for s in shapes}) == 1:
                raise ShapeError(e.message, e.loc) from None
            raise
        xs = [broadcast_to_shape(x, shape) for x in xs]
    return prim_fn(*xs)


def normalize_axis(axis: int, ndim: int, name: str) -> int:
    if not -ndim <= axis < max(ndim, 1) or (ndim == 0 and axis not in (0, -1)):
        raise AxisError(f"{name}: axis {axis} is out of bounds for an array of dimension {ndim}",
                         user_location())
    return axis % ndim if ndim else 0


def normalize_axes(axis, ndim: int, name: str) -> tuple[int, ...]:
    """`axis` (None, an int or a tuple) as sorted non-negative axes; None means all."""
    if axis is None:
        return tuple(range(ndim))
    axes = (axis,) if isinstance(axis, (int, np.integer)) else tuple(axis)
    out = []
    for a in axes:
        a = int(a)
        if not -ndim <= a < ndim:
            raise AxisError(f"{name}: axis {a} is out of bounds for an array of dimension {ndim}",
                             user_location())
        out.append(a % ndim)
    if len(set(out)) != len(out):
        raise AxisError(f"{name}: repeated axis in {axis}", user_location())
    return tuple(sorted(out))
