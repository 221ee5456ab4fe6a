"""Window reductions: `reduce_window_sum`, `reduce_window_max`, `reduce_window_min` (JAX's monoid
reduce_window primitives, XLA's ReduceWindow): each output element folds a window of the operand,
dilated by `base_dilation` (holes), padded by (lo, hi) per axis (a negative amount crops), with
the window's taps `window_dilation` apart and windows `window_strides` apart; padding and holes hold
the fold's identity (0, -inf, +inf or the dtype's extremes).

The VJPs are written with existing primitives, tap by tap: each tap of the window reads a strided
slice of the padded operand, so the cotangent of a tap is that slice's transpose (a pad). A sum
sends the cotangent to every tap; a max or min to the first tap (in row-major window order) equal
to the result, as JAX's select-and-scatter does (`_reduce_window_chooser_jvp_rule`, ties to the
first). Their own derivatives (grad of grad, forward mode) follow from those primitives' rules.
"""

from __future__ import annotations

import itertools

import numpy as np

from ember.errors import ShapeError
from ember.tracer import prims as P
from ember.tracer.aval import ShapedArray
from ember.tracer.primitive import Primitive, def_batch, def_impl, def_shape, def_vjp
from ember.tracer.prims.reduce import identity
from ember.tracer.prims.util import check_kind, moveaxis, shape_of

reduce_window_sum_p = Primitive("reduce_window_sum", kind="opaque", expensive=True)
reduce_window_max_p = Primitive("reduce_window_max", kind="opaque", expensive=True)
reduce_window_min_p = Primitive("reduce_window_min", kind="opaque", expensive=True)
# each window primitive's fold, as the reduction primitive that has its identity and its NumPy ufunc
FOLDS = {reduce_window_sum_p: P.reduce_sum_p, reduce_window_max_p: P.reduce_max_p,
         reduce_window_min_p: P.reduce_min_p}
_UFUNC = {P.reduce_sum_p: np.add, P.reduce_max_p: np.maximum, P.reduce_min_p: np.minimum}
PARAMS = ("window_dimensions", "window_strides", "padding", "base_dilation", "window_dilation")


def reduce_window(prim: Primitive, x, *, window_dimensions, window_strides, padding, base_dilation,
                  window_dilation):
    """Bind a window primitive with its params made canonical (int tuples, (lo, hi) pairs)."""
    ints = lambda xs: tuple(int(v) for v in xs)  # noqa: E731
    return prim.bind(x, window_dimensions=ints(window_dimensions), window_strides=ints(window_strides),
                     padding=tuple(ints(p) for p in padding), base_dilation=ints(base_dilation),
                     window_dilation=ints(window_dilation))


def _dilated(n: int, d: int) -> int:
    return 0 if n == 0 else 1 + d * (n - 1)


def window_out_shape(shape, window_dimensions, window_strides, padding, base_dilation, window_dilation):
    """JAX's reduce_window_shape_tuple: windows over the dilated, padded operand."""
    out = []
    for n, k, s, (lo, hi), bd, wd in zip(shape, window_dimensions, window_strides, padding, base_dilation,
                                         window_dilation):
        out.append(max((_dilated(n, bd) + lo + hi - _dilated(k, wd)) // s + 1, 0))
    return tuple(out)


def _shape_rule(name: str):
    def rule(x, *, window_dimensions, window_strides, padding, base_dilation, window_dilation):
        check_kind(name, x, "numeric")
        if x.ndim != len(window_dimensions):
            raise ShapeError(f"reduce_window got the wrong number of window_dimensions for operand: got operand "
                             f"shape {x.shape} with window_dimensions {window_dimensions}.")
        for what, seq in (("window_strides", window_strides), ("base_dilation", base_dilation),
                          ("window_dilation", window_dilation), ("padding", padding)):
            if len(seq) != len(window_dimensions):
                raise ShapeError(f"reduce_window got inconsistent {what} and window_dimensions: got {what} {seq} "
                                 f"and window_dimensions {window_dimensions}.")
        for what, seq in (("window_dimensions", window_dimensions), ("window_strides", window_strides),
                          ("base_dilation", base_dilation), ("window_dilation", window_dilation)):
            if any(v <= 0 for v in seq):
                raise ShapeError(f"reduce_window {what} must have every element positive, got {seq}.")
        for n, bd, (lo, hi) in zip(x.shape, base_dilation, padding):
            if _dilated(n, bd) + lo + hi < 0:
                raise ShapeError(f"reduce_window: padding {padding} crops more than the operand {x.shape} holds")
        shape = window_out_shape(x.shape, window_dimensions, window_strides, padding, base_dilation, window_dilation)
        return ShapedArray(shape, x.dtype, x.weak_type)

    return rule


for _p in FOLDS:
    def_shape(_p)(_shape_rule(_p.name))


# --- the numpy reference ----------------------------------------------------------------------------

def window_reference(x: np.ndarray, fold: Primitive, *, window_dimensions, window_strides, padding, base_dilation,
                     window_dilation) -> np.ndarray:
    """The windows directly: fill a dilated, padded copy with the fold's identity, take every window
    (sliding_window_view, strided), its taps window_dilation apart, and fold them."""
    init = identity(fold, x.dtype)
    out_shape = window_out_shape(x.shape, window_dimensions, window_strides, padding, base_dilation, window_dilation)
    if 0 in out_shape:
        return np.zeros(out_shape, x.dtype)
    grown = [_dilated(n, bd) + max(lo, 0) + max(hi, 0) for n, bd, (lo, hi) in zip(x.shape, base_dilation, padding)]
    full = np.full(grown, init, x.dtype)
    full[tuple(slice(max(lo, 0), max(lo, 0) + _dilated(n, bd), bd) for n, bd, (lo, _) in
               zip(x.shape, base_dilation, padding))] = x
    full = full[tuple(slice(max(-lo, 0), g - max(-hi, 0)) for g, (lo, hi) in zip(grown, padding))]
    spans = [_dilated(k, wd) for k, wd in zip(window_dimensions, window_dilation)]
    win = np.lib.stride_tricks.sliding_window_view(full, spans)
    nd = x.ndim
    win = win[tuple(slice(0, o * s, s) for o, s in zip(out_shape, window_strides))
              + tuple(slice(None, None, wd) for wd in window_dilation)]
    axes = tuple(range(nd, 2 * nd))
    return np.asarray(_UFUNC[fold].reduce(win, axis=axes, dtype=x.dtype)).astype(x.dtype, copy=False)


for _p, _fold in FOLDS.items():
    def_impl(_p)(lambda x, _fold=_fold, **params: window_reference(x, _fold, **params))


# --- VJPs: tap by tap, with existing primitives ---------------------------------------------------------

def _padded(x, init, padding, base_dilation):
    """`x` dilated and padded as the windows read it (holes and padding hold `init`; negative pads crop)."""
    config = [(max(lo, 0), max(hi, 0), bd - 1) for (lo, hi), bd in zip(padding, base_dilation)]
    grown = P.pad(x, np.asarray(init, x.dtype)[()], config)
    shape = shape_of(grown)
    return P.slice(grown, tuple(max(-lo, 0) for lo, _ in padding),
                   tuple(n - max(-hi, 0) for n, (_, hi) in zip(shape, padding)), (1,) * len(shape))


def _tap_slices(t, out_shape, window_strides, window_dilation):
    start = tuple(i * wd for i, wd in zip(t, window_dilation))
    limit = tuple(b + (o - 1) * s + 1 for b, o, s in zip(start, out_shape, window_strides))
    return start, limit


def _untap(ct, t, padded_shape, window_strides, window_dilation):
    """The transpose of tap `t`'s strided slice: `ct` placed back in the padded operand's coordinates."""
    start, limit = _tap_slices(t, shape_of(ct), window_strides, window_dilation)
    config = [(b, n - e, s - 1) for b, e, n, s in zip(start, limit, padded_shape, window_strides)]
    return P.pad(ct, np.zeros((), ct.dtype)[()], config)


def _unpadded(ct, x_shape, padding, base_dilation):
    """The transpose of `_padded`: the cotangent at the operand's own elements."""
    grown = P.pad(ct, np.zeros((), ct.dtype)[()], [(max(-lo, 0), max(-hi, 0), 0) for lo, hi in padding])
    start = tuple(max(lo, 0) for lo, _ in padding)
    limit = tuple(b + _dilated(n, bd) for b, n, bd in zip(start, x_shape, base_dilation))
    return P.slice(grown, start, limit, tuple(base_dilation))


def _window_vjp(fold: Primitive):
    def rule(ct, x, *, out, active, window_dimensions, window_strides, padding, base_dilation, window_dilation):
        if not active[0] or 0 in shape_of(ct) or 0 in shape_of(x):
            return (None,)
        padded = _padded(x, identity(fold, x.dtype), padding, base_dilation) if fold is not P.reduce_sum_p else None
        padded_shape = tuple(_dilated(n, bd) + lo + hi for n, bd, (lo, hi) in zip(shape_of(x), base_dilation,
                                                                                   padding))
        total, taken = None, None
        zero = np.zeros((), ct.dtype)[()]
        for t in itertools.product(*(range(k) for k in window_dimensions)):
            part = ct
            if padded is not None:  # the first tap equal to the result takes the cotangent
                start, limit = _tap_slices(t, shape_of(ct), window_strides, window_dilation)
                hit = P.eq(P.slice(padded, start, limit, window_strides), out)
                chosen = hit if taken is None else P.and_(hit, P.not_(taken))
                taken = hit if taken is None else P.or_(taken, hit)
                part = P.select(chosen, ct, zero)
            back = _untap(part, t, padded_shape, window_strides, window_dilation)
            total = back if total is None else P.add(total, back)
        return (_unpadded(total, shape_of(x), padding, base_dilation),)

    return rule


for _p, _fold in FOLDS.items():
    def_vjp(_p)(_window_vjp(_fold))


# --- batching: the vmapped axis is a window axis of size 1 ----------------------------------------------

def _window_batch(prim: Primitive):
    def rule(args, dims, *, window_dimensions, window_strides, padding, base_dilation, window_dilation):
        x = moveaxis(args[0], dims[0], 0)
        return reduce_window(prim, x, window_dimensions=(1, *window_dimensions),
                             window_strides=(1, *window_strides), padding=((0, 0), *padding),
                             base_dilation=(1, *base_dilation), window_dilation=(1, *window_dilation)), 0

    return rule


for _p in FOLDS:
    def_batch(_p)(_window_batch(_p))
