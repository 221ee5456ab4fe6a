"""ember.numpy: the array functions users call, with NumPy's names and semantics.

Outside a traced function they compute with NumPy; inside one they stage primitives. Promotion
follows JAX: Python scalars are weak (``x * 2.0`` keeps x's dtype), new arrays default to float32.
"""

import sys as _sys

import numpy as _np

from ember.errors import missing_attribute as _missing_attribute
from ember.naming import publish as _publish
from ember.numpy import _core, _creation, _methods, linalg
from ember.numpy._arrays import (
    cross,
    diag,
    diagflat,
    diagonal,
    diff,
    ediff1d,
    gradient,
    indices,
    kron,
    meshgrid,
    pad,
    put_along_axis,
    repeat,
    roll,
    rot90,
    take_along_axis,
    tile,
    trace,
    tri,
    tril,
    triu,
)
from ember.numpy._convolve import convolve, correlate
from ember.numpy._creation import (
    arange,
    empty,
    empty_like,
    eye,
    full,
    full_like,
    identity,
    linspace,
    ones,
    ones_like,
    scalar_type,
    zeros,
    zeros_like,
)
from ember.numpy._dtypes import (
    can_cast,
    complexfloating,
    finfo,
    floating,
    generic,
    iinfo,
    inexact,
    integer,
    issubdtype,
    number,
    promote_types,
    result_type,
    signedinteger,
    unsignedinteger,
)
from ember.numpy._indexing import take
from ember.numpy._math import (
    abs,
    absolute,
    acos,
    acosh,
    add,
    arccos,
    arccosh,
    arcsin,
    arcsinh,
    arctan,
    arctan2,
    arctanh,
    around,
    asin,
    asinh,
    atan,
    atan2,
    atanh,
    bitwise_and,
    bitwise_count,
    bitwise_invert,
    bitwise_left_shift,
    bitwise_not,
    bitwise_or,
    bitwise_right_shift,
    bitwise_xor,
    cbrt,
    ceil,
    clip,
    copysign,
    cos,
    cosh,
    divide,
    divmod,
    equal,
    exp,
    exp2,
    expm1,
    floor,
    floor_divide,
    fmod,
    greater,
    greater_equal,
    hypot,
    invert,
    isfinite,
    isinf,
    isnan,
    left_shift,
    less,
    less_equal,
    log,
    log1p,
    log2,
    log10,
    logaddexp,
    logaddexp2,
    logical_and,
    logical_not,
    logical_or,
    logical_xor,
    maximum,
    minimum,
    mod,
    multiply,
    negative,
    nextafter,
    not_equal,
    positive,
    power,
    reciprocal,
    remainder,
    right_shift,
    round,
    sign,
    sin,
    sinh,
    sqrt,
    square,
    subtract,
    tan,
    tanh,
    true_divide,
    where,
)
from ember.numpy._numeric import (
    allclose,
    array_equal,
    array_equiv,
    interp,
    isclose,
    polyadd,
    polydiv,
    polyfit,
    polymul,
    polysub,
    polyval,
    vander,
)
from ember.numpy._products import dot, einsum, inner, matmul, outer, tensordot, vdot
from ember.numpy._reductions import all, amax, amin, any, argmax, argmin, max, mean, min, prod, std, sum, var
from ember.numpy._shape import (
    atleast_1d,
    atleast_2d,
    broadcast_arrays,
    broadcast_to,
    concatenate,
    expand_dims,
    flip,
    hstack,
    moveaxis,
    ndim,
    ravel,
    reshape,
    shape,
    size,
    split,
    squeeze,
    stack,
    swapaxes,
    transpose,
    vstack,
)
from ember.numpy._sorting import (
    argpartition,
    argsort,
    argwhere,
    cumprod,
    cumsum,
    cumulative_prod,
    cumulative_sum,
    digitize,
    flatnonzero,
    lexsort,
    median,
    nancumprod,
    nancumsum,
    nanmedian,
    nanpercentile,
    nanquantile,
    nonzero,
    partition,
    percentile,
    quantile,
    searchsorted,
    sort,
    unique,
    unique_all,
    unique_counts,
    unique_inverse,
    unique_values,
)
from ember.numpy._stats import (
    average,
    bincount,
    corrcoef,
    cov,
    histogram,
    histogram2d,
    histogram_bin_edges,
    nanargmax,
    nanargmin,
    nanmax,
    nanmean,
    nanmin,
    nanprod,
    nanstd,
    nansum,
    nanvar,
)
from ember.tracer import trace as _trace
from ember.tracer.array import Array

_methods.install()
_trace.numpy_dispatch.update({"numpy": _sys.modules[__name__], "numpy.linalg": linalg})
_core.check_operands(globals())


def asarray(a, dtype=None):
    """`a` as an array: a traced value inside a trace, else an ember Array (an Array itself; a copy of a
    NumPy array, which its owner may still write, as jnp.asarray copies). Python scalars and lists of
    them default to float32/int32/bool, as in JAX."""
    if type(a) is Array and (dtype is None or _core.dtypes.canonicalize(dtype) == a.dtype):
        return a  # immutable: no copy
    out = _core.asarray(a, dtype)
    if type(out) is not _np.ndarray:
        return out
    return (out.copy() if out is a or out.base is not None else out).view(Array)


def array(object, dtype=None, copy: bool = True):
    """An array from `object` (nested lists may hold traced values); copies NumPy input by default."""
    out = _creation.array(object, dtype, copy)
    return out.view(Array) if type(out) is _np.ndarray else out


_core.check_operands(vars(linalg))

# Callable as casts (jnp.float32(x) is x.astype(float32), traced or not), usable wherever a dtype is.
bool_ = scalar_type(_np.bool_)
int8, int16, int32, int64 = (scalar_type(t) for t in (_np.int8, _np.int16, _np.int32, _np.int64))
uint8, uint16, uint32, uint64 = (scalar_type(t) for t in (_np.uint8, _np.uint16, _np.uint32, _np.uint64))
float16, float32, float64 = (scalar_type(t) for t in (_np.float16, _np.float32, _np.float64))
dtype = _np.dtype
pi, e, inf, nan = _np.pi, _np.e, _np.inf, _np.nan
newaxis = None
ndarray = _np.ndarray

__all__ = [
    "linalg", "asarray", "arange", "array", "empty", "empty_like", "eye", "full", "full_like", "identity",
    "linspace", "ones", "ones_like", "zeros", "zeros_like", "take", "abs", "absolute", "add", "around",
    "bitwise_and", "bitwise_or", "ceil", "clip", "cos", "divide", "divmod", "equal", "exp", "expm1", "floor",
    "floor_divide", "fmod", "greater", "greater_equal", "isfinite", "isinf", "isnan", "less", "less_equal", "log",
    "log1p", "log2", "log10", "logical_and", "logical_not", "logical_or", "logical_xor", "maximum", "minimum",
    "mod", "multiply", "negative", "not_equal", "positive", "power", "reciprocal", "remainder", "round",
    "sign", "sin", "sqrt", "square", "subtract", "tanh", "true_divide", "where", "dot", "einsum", "inner",
    "matmul", "outer", "tensordot", "vdot", "all", "amax", "amin", "any", "argmax", "argmin", "max", "mean",
    "min", "prod", "std", "sum", "var", "atleast_1d", "atleast_2d", "broadcast_arrays", "broadcast_to",
    "concatenate", "expand_dims", "flip", "hstack", "moveaxis", "ndim", "ravel", "reshape", "shape", "size",
    "split", "squeeze", "stack", "swapaxes", "transpose", "vstack", "bool_", "int8", "int16", "int32",
    "int64", "uint8", "uint16", "uint32", "uint64", "float16", "float32", "float64", "dtype", "pi", "e",
    "inf", "nan", "newaxis", "ndarray",
    "tan", "arctan", "atan", "arcsin", "asin", "arccos", "acos", "arctan2", "atan2", "sinh", "cosh", "arcsinh",
    "asinh", "arccosh", "acosh", "arctanh", "atanh",
    "cbrt", "copysign", "exp2", "hypot", "logaddexp", "logaddexp2", "nextafter",
    "bitwise_xor", "bitwise_not", "invert", "bitwise_invert", "left_shift", "right_shift", "bitwise_left_shift",
    "bitwise_right_shift", "bitwise_count",
    "convolve", "correlate",
    "cross", "diag", "diagflat", "diagonal", "diff", "ediff1d", "gradient", "indices", "kron", "meshgrid", "pad",
    "put_along_axis", "repeat", "roll", "rot90", "take_along_axis", "tile", "trace", "tri", "tril", "triu",
    "allclose", "array_equal", "array_equiv", "interp", "isclose", "polyadd", "polysub", "polyval",
    "polydiv", "polyfit", "polymul", "vander",
    "average", "bincount", "corrcoef", "cov", "histogram", "histogram2d", "histogram_bin_edges", "nanargmax",
    "nanargmin", "nanmax", "nanmean", "nanmin", "nanprod", "nanstd", "nansum", "nanvar",
]
# scans, sorts and what is built on them (ember/numpy/_sorting.py)
__all__ += [
    "argpartition", "argsort", "argwhere", "cumprod", "cumsum", "cumulative_prod", "cumulative_sum",
    "digitize", "flatnonzero", "lexsort", "median", "nancumprod", "nancumsum", "nanmedian", "nanpercentile",
    "nanquantile", "nonzero", "partition", "percentile", "quantile", "searchsorted", "sort", "unique",
    "unique_all", "unique_counts", "unique_inverse", "unique_values",
]
__all__ += ["can_cast", "finfo", "iinfo", "issubdtype", "promote_types", "result_type",  # dtypes (_dtypes.py)
            "generic", "number", "inexact", "floating", "complexfloating", "integer", "signedinteger",
            "unsignedinteger"]


_core.arrays_out(globals(), [n for n in __all__ if n not in ("asarray", "array", "result_type", "promote_types")])
_core.arrays_out(vars(linalg), linalg.__all__)
_publish(globals(), __name__, __all__)


def __getattr__(name: str):
    """Say that a missing name is not implemented yet, with the closest names and the fallback."""
    raise _missing_attribute('ember.numpy', name, globals(), ("numpy", _np))
