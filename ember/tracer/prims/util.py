"""Helpers shared by the primitive families: elementwise shape checks, scalar operands, batch axes."""

from __future__ import annotations

import numpy as np

from ember.errors import DTypeError, ShapeError
from ember.tracer import dtypes
from ember.tracer.aval import ShapedArray

_KIND_WORDS = {
    "float": ("f", "a floating-point"),
    "numeric": ("fiu", "a numeric (int or float)"),
    "any": ("fiub", "an array"),
    "intbool": ("iub", "an integer or bool"),
    "int": ("iu", "an integer"),
    "arith": ("fiub", "a numeric or bool"),
}


def check_kind(name: str, aval: ShapedArray, accepts: str) -> None:
    kinds, words = _KIND_WORDS[accepts]
    if aval.dtype.kind not in kinds:
        hint = "; convert it with .astype(float)" if accepts == "float" else ""
        raise DTypeError(f"{name} requires {words} operand, got {aval.dtype.name}{hint}")


def elementwise_aval(name: str, avals, accepts: str = "any", out_dtype=None) -> ShapedArray:
    """Operands must share a dtype and have equal shapes or be 0-d (scalars broadcast)."""
    shape = ()
    for a in avals:
        if a.shape:
            if shape and a.shape != shape:
                shapes = " and ".join(str(b.shape) for b in avals)
                raise ShapeError(f"{name}: operand shapes {shapes} differ (elementwise primitives take "
                                 "equal shapes or scalars)")
            shape = a.shape
    dt = avals[0].dtype
    for a in avals[1:]:
        if a.dtype != dt:
            names = " and ".join(b.dtype.name for b in avals)
            raise DTypeError(f"{name}: operand dtypes {names} differ")
    for a in avals:
        check_kind(name, a, accepts)
    weak = all(a.weak_type for a in avals)
    return ShapedArray(shape, out_dtype or dt, weak and out_dtype is None)


def computed_wider(np_fn, float64_too: bool = False):
    """`np_fn` computed in float64 (in long double for float64 too, where asked) and rounded once to the
    operands' dtype: NumPy's own float32 log10 and cbrt are off by an ulp at exact results (log10(1000) is
    3.0000002), and its float64 logaddexp2 by 2.4 ulp where the result cancels; the primitives are not."""
    def fn(*xs):
        dt = xs[0].dtype
        wide = np.longdouble if dt == np.float64 and float64_too else np.float64
        if dt == wide:
            return np_fn(*xs)
        return np_fn(*(x.astype(wide) for x in xs)).astype(dt)

    return fn


PY_SCALARS = (bool, int, float)  # the Python scalar types that are weakly typed operands


def is_python_scalar(x) -> bool:
    """`x` is a Python bool/int/float (NumPy scalars subclass float but are strongly typed)."""
    return isinstance(x, PY_SCALARS) and not isinstance(x, np.generic)


def scalar_like(x, ref):
    """A Python scalar `x` as a weakly typed Literal of `ref`'s dtype (how the wrappers take Python
    scalars): weak, so `mul(x, 2.0)` keeps a weakly typed `x` weak, as in JAX."""
    if is_python_scalar(x):
        from ember.tracer.ir import Literal

        return Literal(x, _dtype_of(ref), weak_type=True)
    return x


def zero_scalar(ref):
    """A 0-d zero of `ref`'s dtype (select and the binary prims broadcast 0-d operands)."""
    return np.zeros((), _dtype_of(ref))[()]


def _dtype_of(x) -> np.dtype:
    dt = getattr(x, "dtype", None)
    if dt is None:
        dt, _ = dtypes.scalar_dtype(x)
    return dt


def unchanged(x):
    """The result of a wrapper whose operation would not change `x` (a reshape to the same shape, a
    reduction over no axes, ...): `x` itself for a traced value (no node is staged), a copy for a
    NumPy array, because eager results never alias the caller's arrays (as bind's eager path)."""
    return np.array(x) if isinstance(x, np.ndarray) else x


def shape_of(x) -> tuple[int, ...]:
    return tuple(np.shape(x)) if not hasattr(x, "shape") else tuple(x.shape)


def ndim_of(x) -> int:
    return len(shape_of(x))


# --- batching helpers -----------------------------------------------------------------------------

def moveaxis(x, src: int, dst: int):
    """Move axis `src` of a traced value to `dst` with one transpose (none if already there)."""
    from ember.tracer import prims as P

    nd = ndim_of(x)
    src, dst = src % nd, dst % nd
    if src == dst:
        return x
    perm = [i for i in range(nd) if i != src]
    perm.insert(dst, src)
    return P.transpose(x, tuple(perm))


def batch_size(args, dims) -> int:
    for a, d in zip(args, dims):
        if d is not None:
            return shape_of(a)[d]
    raise ValueError("no batched operand")


def move_bdim(x, src: int | None, dst: int, size: int):
    """Put the batch axis of `x` at `dst`: move it from `src`, or broadcast an unbatched `x`
    (`src` None) along a new axis `dst` of `size`."""
    from ember.tracer import prims as P

    if src is None:
        shape = shape_of(x)
        new_shape = shape[:dst] + (size,) + shape[dst:]
        return P.broadcast_in_dim(x, new_shape, tuple(i for i in range(len(new_shape)) if i != dst))
    return moveaxis(x, src, dst)


def bdim_at_front(x, d, size: int):
    """Give `x` its batch axis at 0 (see move_bdim)."""
    return move_bdim(x, d, 0, size)


def elementwise_batch(prim):
    """Batching rule for elementwise prims: batch axes to the front, 0-d unbatched operands stay."""
    from ember.tracer import prims as P

    def rule(args, dims, **params):
        size = batch_size(args, dims)
        example = ()
        for a, d in zip(args, dims):
            s = shape_of(a)
            s = s[:d] + s[d + 1:] if d is not None else s
            if s:
                example = s
        full = (size,) + example
        new = []
        for a, d in zip(args, dims):
            if d is None:
                new.append(a if ndim_of(a) == 0 else
                           P.broadcast_in_dim(a, full, tuple(range(1, len(full)))))
            else:
                a = moveaxis(a, d, 0)
                if ndim_of(a) < len(full):
                    a = P.broadcast_in_dim(a, full, (0,))
                new.append(a)
        return prim.bind(*new, **params), 0

    return rule


def unbroadcast_scalar(ct, x):
    """Cotangent for operand `x` of an elementwise op: summed to a scalar if `x` was 0-d."""
    from ember.tracer import prims as P

    if ndim_of(x) == 0 and ndim_of(ct) > 0:
        return P.reduce_sum(ct, tuple(range(ndim_of(ct))))
    return ct
