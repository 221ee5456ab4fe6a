"""`conv_general_dilated`: XLA's convolution, as `jax.lax.conv_general_dilated` computes it.

Params are canonical: `window_strides`, `lhs_dilation`, `rhs_dilation` one int per spatial axis,
`padding` explicit (lo, hi) pairs (the public function resolves "SAME"/"VALID"), and
`dimension_numbers` JAX's ConvDimensionNumbers as three int tuples (lhs_spec, rhs_spec, out_spec):
each names, in order, the positions of (batch, feature, spatial...) of lhs and the output and of
(out feature, in feature, spatial...) of rhs. Feature groups split lhs's features and rhs's output
features into `feature_group_count` outer blocks; batch groups split lhs's batch the same way.
The VJP is two convolutions (JAX's transpose rules), the batching rule folds the vmapped axis into
the batch or the feature groups (JAX's `_conv_general_dilated_batch_rule`).
"""

from __future__ import annotations

import numpy as np

from ember.errors import ArgumentValueError, DTypeError, IncompatibleShapesError, ShapeError
from ember.tracer import prims as P
from ember.tracer.aval import ShapedArray
from ember.tracer.primitive import Primitive, def_batch, def_impl, def_jvp, def_shape, def_vjp
from ember.tracer.prims.util import moveaxis, shape_of

conv_general_dilated_p = Primitive("conv_general_dilated", kind="contraction", expensive=True)


def conv_general_dilated(lhs, rhs, *, window_strides, padding, lhs_dilation, rhs_dilation, dimension_numbers,
                         feature_group_count: int = 1, batch_group_count: int = 1):
    """Bind the primitive with its params made canonical (ints and int tuples)."""
    ints = lambda xs: tuple(int(x) for x in xs)  # noqa: E731
    return conv_general_dilated_p.bind(
        lhs, rhs, window_strides=ints(window_strides), padding=tuple(ints(p) for p in padding),
        lhs_dilation=ints(lhs_dilation), rhs_dilation=ints(rhs_dilation),
        dimension_numbers=tuple(ints(s) for s in dimension_numbers),
        feature_group_count=int(feature_group_count), batch_group_count=int(batch_group_count))


def dilate_dim(d: int, dilation: int) -> int:
    """The size of an axis of `d` elements with `dilation - 1` holes between neighbours."""
    return 0 if d == 0 else 1 + dilation * (d - 1)


def out_spatial(in_sizes, k_sizes, window_strides, padding, lhs_dilation, rhs_dilation) -> tuple[int, ...]:
    """The output's spatial sizes (in canonical order): windows of the dilated kernel over the
    dilated, padded input, `window_strides` apart."""
    out = []
    for n, k, s, (lo, hi), ld, rd in zip(in_sizes, k_sizes, window_strides, padding, lhs_dilation, rhs_dilation):
        padded, window = dilate_dim(n, ld) + lo + hi, dilate_dim(k, rd)
        out.append(max((padded - window) // s + 1, 0))
    return tuple(out)


@def_shape(conv_general_dilated_p)
def _conv_shape(lhs, rhs, *, window_strides, padding, lhs_dilation, rhs_dilation, dimension_numbers,
                feature_group_count, batch_group_count):
    if lhs.dtype != rhs.dtype:
        raise DTypeError(f"conv_general_dilated: operand dtypes {lhs.dtype.name} and {rhs.dtype.name} differ")
    if lhs.dtype.kind == "b":
        raise DTypeError("conv_general_dilated: bool operands are not supported; convert them to a number type")
    _check_counts(lhs.shape, rhs.shape, dimension_numbers, feature_group_count, batch_group_count)
    lhs_spec, rhs_spec, out_spec = dimension_numbers
    n_sp = len(lhs.shape) - 2
    for name, seq in (("window_strides", window_strides), ("padding", padding), ("lhs_dilation", lhs_dilation),
                      ("rhs_dilation", rhs_dilation)):
        if len(seq) != n_sp:
            raise IncompatibleShapesError(f"conv_general_dilated window and {name} must have the same number of "
                                          f"dimensions, but got {n_sp} and {len(seq)}")
    for name, seq in (("window_strides", window_strides), ("lhs_dilation", lhs_dilation),
                      ("rhs_dilation", rhs_dilation)):
        if any(s <= 0 for s in seq):
            raise ShapeError(f"conv_general_dilated: all {name} must be positive, got {seq}")
    for j, d in enumerate(rhs_spec[2:]):
        if rhs.shape[d] == 0:  # (JAX's message, from XLA's verifier)
            raise IncompatibleShapesError(f"conv_general_dilated expects window to have positive value for {j}-th "
                                          "window dimension, but got 0.")
    in_sizes = [lhs.shape[d] for d in lhs_spec[2:]]
    for n, ld, (lo, hi) in zip(in_sizes, lhs_dilation, padding):
        if dilate_dim(n, ld) + lo + hi < 0:
            raise IncompatibleShapesError("Negative padding is larger than the size of the corresponding dimension: "
                                          f"got padding={padding} for lhs spatial shape {tuple(in_sizes)}")
    spatial = out_spatial(in_sizes, [rhs.shape[d] for d in rhs_spec[2:]], window_strides, padding, lhs_dilation,
                          rhs_dilation)
    canonical = (lhs.shape[lhs_spec[0]] // batch_group_count, rhs.shape[rhs_spec[0]]) + spatial
    shape = [0] * len(canonical)
    for pos, size in zip(out_spec, canonical):
        shape[pos] = size
    return ShapedArray(tuple(shape), lhs.dtype, lhs.weak_type and rhs.weak_type)


def _check_counts(lhs_shape, rhs_shape, dn, feature_group_count: int, batch_group_count: int) -> None:
    """JAX's checks of ranks, specs and group counts, with its messages (TypeError or ValueError as JAX)."""
    if len(lhs_shape) != len(rhs_shape):
        raise ShapeError(f"conv_general_dilated lhs and rhs must have the same number of dimensions, but got "
                         f"{lhs_shape} and {rhs_shape}.")
    if len(lhs_shape) < 2:
        raise ShapeError(f"conv_general_dilated needs operands of rank 2 or more, got {lhs_shape}")
    for name, spec in zip(("lhs", "rhs", "out"), dn):
        if sorted(spec) != list(range(len(lhs_shape))):
            raise ShapeError(f"conv_general_dilated: {name}_spec {spec} is not a permutation of the "
                             f"{len(lhs_shape)} axes")
    lhs_spec, rhs_spec, _ = dn
    if feature_group_count <= 0:
        raise ArgumentValueError(f"conv_general_dilated feature_group_count must be a positive integer, got "
                                 f"{feature_group_count}.")
    if batch_group_count <= 0:
        raise ArgumentValueError(f"conv_general_dilated batch_group_count must be a positive integer, got "
                                 f"{batch_group_count}.")
    features, in_features = lhs_shape[lhs_spec[1]], rhs_shape[rhs_spec[1]]
    out_features, batch = rhs_shape[rhs_spec[0]], lhs_shape[lhs_spec[0]]
    checks = (
        (features % feature_group_count, "feature_group_count must divide lhs feature dimension size, but "
         f"{feature_group_count} does not divide {features}."),
        (features // feature_group_count != in_features, "lhs feature dimension size divided by "
         "feature_group_count must equal the rhs input feature dimension size, but "
         f"{features} // {feature_group_count} != {in_features}."),
        (out_features % feature_group_count, "rhs output feature dimension size must be a multiple of "
         f"feature_group_count, but {out_features} is not a multiple of {feature_group_count}."),
        (batch % batch_group_count, "batch_group_count must divide lhs batch dimension size, but "
         f"{batch_group_count} does not divide {batch}."),
        (out_features % batch_group_count, "rhs output feature dimension size must be a multiple of "
         f"batch_group_count, but {out_features} is not a multiple of {batch_group_count}."),
        (batch_group_count > 1 and feature_group_count > 1, "At most one of batch_group_count and "
         f"feature_group_count may be > 1, got batch_group_count={batch_group_count} and "
         f"feature_group_count={feature_group_count}"),
    )
    for failed, message in checks:
        if failed:
            raise IncompatibleShapesError(f"conv_general_dilated {message}")


# --- the numpy reference ----------------------------------------------------------------------------

def _dilate(x: np.ndarray, axes, dilation) -> np.ndarray:
    """`x` with `dilation - 1` zeros between neighbours along each of `axes`."""
    if all(d == 1 for d in dilation):
        return x
    shape = list(x.shape)
    for a, d in zip(axes, dilation):
        shape[a] = dilate_dim(shape[a], d)
    out = np.zeros(shape, x.dtype)
    where = [slice(None)] * x.ndim
    for a, d in zip(axes, dilation):
        where[a] = slice(None, None, d)
    out[tuple(where)] = x
    return out


def _pad(x: np.ndarray, axes, padding) -> np.ndarray:
    """`x` zero-padded by (lo, hi) along `axes`; a negative amount crops."""
    grow = [(0, 0)] * x.ndim
    crop = [slice(None)] * x.ndim
    for a, (lo, hi) in zip(axes, padding):
        grow[a] = (max(lo, 0), max(hi, 0))
        crop[a] = slice(max(-lo, 0), x.shape[a] + max(lo, 0) + max(hi, 0) - max(-hi, 0))
    return np.pad(x, grow)[tuple(crop)]


def conv_reference(lhs: np.ndarray, rhs: np.ndarray, *, window_strides, padding, lhs_dilation, rhs_dilation,
                   dimension_numbers, feature_group_count, batch_group_count) -> np.ndarray:
    """The convolution directly: dilate and pad the input, dilate the kernel, take every window
    (sliding_window_view, then the strides) and contract it with its group's kernel."""
    lhs_spec, rhs_spec, out_spec = dimension_numbers
    x, w = np.transpose(lhs, lhs_spec), np.transpose(rhs, rhs_spec)  # (N, C, sp...), (O, I, sp...)
    n_sp = x.ndim - 2
    sp = tuple(range(2, 2 + n_sp))
    x = _pad(_dilate(x, sp, lhs_dilation), sp, padding)
    w = _dilate(w, sp, rhs_dilation)
    g_f, g_b = feature_group_count, batch_group_count
    (n, c), (o, i) = x.shape[:2], w.shape[:2]
    out_sp = tuple(max((x.shape[a] - w.shape[a]) // s + 1, 0) for a, s in zip(sp, window_strides))
    groups = g_f * g_b
    out = np.zeros((n // g_b, o) + out_sp, lhs.dtype)
    if out.size and i and all(w.shape[2:]):
        win = np.lib.stride_tricks.sliding_window_view(x, w.shape[2:], axis=sp)
        win = win[(slice(None), slice(None)) + tuple(slice(None, k * s, s) for k, s in zip(out_sp, window_strides))]
        # windows (N, C, out..., k...) -> (groups, rows, i * k) and kernels (groups, o / groups, i * k)
        if g_b > 1:
            win = win.reshape((g_b, n // g_b) + win.shape[1:])
        else:
            win = win.reshape((1, n, g_f, c // g_f) + win.shape[2:])
            win = np.moveaxis(win, 2, 0)[:, 0]
        rows = win.shape[1] * int(np.prod(out_sp))
        win = np.moveaxis(win, 2, 2 + n_sp).reshape(groups, rows, -1)
        ker = w.reshape(groups, o // groups, -1)
        prod = np.matmul(win, np.swapaxes(ker, 1, 2))  # (groups, rows, o / groups)
        prod = prod.reshape((groups, n // g_b) + out_sp + (o // groups,))
        out = np.moveaxis(np.moveaxis(prod, -1, 2), 0, 1)  # (N', groups, o / groups, out...)
        out = out.reshape((n // g_b, o) + out_sp)
    return np.ascontiguousarray(np.transpose(out, np.argsort(out_spec))).astype(lhs.dtype, copy=False)


@def_impl(conv_general_dilated_p)
def _conv_impl(lhs, rhs, **params):
    return conv_reference(lhs, rhs, **params)


# --- VJP: two convolutions (JAX's _conv_general_dilated_transpose_lhs / _rhs) ------------------------

def _swap(spec):
    return (spec[1], spec[0]) + tuple(spec[2:])


def reshape_axis_into(src: int, dst: int, x):
    """Merge axis `src` into axis `dst` (numbered after `src` is removed), `src` the outer factor."""
    shape = list(shape_of(x))
    size = shape.pop(src)
    x = moveaxis(x, src, dst)
    shape[dst] *= size
    return P.reshape(x, tuple(shape))


def reshape_axis_out_of(src: int, outer: int, x):
    """Split axis `src` into (outer, rest)."""
    shape = list(shape_of(x))
    shape[src:src + 1] = [outer, shape[src] // outer]
    return P.reshape(x, tuple(shape))


def _vjp_lhs_padding(in_sizes, k_sizes, window_strides, out_sizes, padding, lhs_dilation, rhs_dilation):
    pads = []
    for n, k, s, o, (lo, _), ld, rd in zip(in_sizes, k_sizes, window_strides, out_sizes, padding, lhs_dilation,
                                          rhs_dilation):
        before = dilate_dim(k, rd) - lo - 1
        pads.append((before, dilate_dim(n, ld) + dilate_dim(k, rd) - 1 - dilate_dim(o, s) - before))
    return tuple(pads)


def _vjp_rhs_padding(in_sizes, k_sizes, window_strides, out_sizes, padding, lhs_dilation, rhs_dilation):
    pads = []
    for n, k, s, o, (lo, _), ld, rd in zip(in_sizes, k_sizes, window_strides, out_sizes, padding, lhs_dilation,
                                          rhs_dilation):
        pads.append((lo, dilate_dim(o, s) - dilate_dim(n, ld) + dilate_dim(k, rd) - lo - 1))
    return tuple(pads)


def _transpose_lhs(ct, lhs, rhs, *, window_strides, padding, lhs_dilation, rhs_dilation, dimension_numbers,
                   feature_group_count, batch_group_count):
    """The input's cotangent: ct convolved with the spatially reversed kernel, in/out features swapped."""
    lhs_spec, rhs_spec, out_spec = dimension_numbers
    lhs_shape, rhs_shape = shape_of(lhs), shape_of(rhs)
    groups = feature_group_count
    if feature_group_count > 1 or batch_group_count > 1:
        groups = max(feature_group_count, batch_group_count)
        rhs = reshape_axis_out_of(rhs_spec[0], groups, rhs)
        rhs = reshape_axis_into(rhs_spec[0], rhs_spec[1], rhs)
    sp = lambda shape, spec: [shape[d] for d in spec[2:]]  # noqa: E731
    pads = _vjp_lhs_padding(sp(lhs_shape, lhs_spec), sp(rhs_shape, rhs_spec), window_strides,
                            sp(shape_of(ct), out_spec), padding, lhs_dilation, rhs_dilation)
    out = conv_general_dilated(ct, P.rev(rhs, rhs_spec[2:]), window_strides=lhs_dilation, padding=pads,
                               lhs_dilation=window_strides, rhs_dilation=rhs_dilation,
                               dimension_numbers=(out_spec, _swap(rhs_spec), lhs_spec), feature_group_count=groups)
    if batch_group_count > 1:
        out = reshape_axis_out_of(lhs_spec[1], batch_group_count, out)
        out = reshape_axis_into(lhs_spec[1], lhs_spec[0], out)
    return out


def _transpose_rhs(ct, lhs, rhs, *, window_strides, padding, lhs_dilation, rhs_dilation, dimension_numbers,
                   feature_group_count, batch_group_count):
    """The kernel's cotangent: the input convolved with ct, batch and feature roles swapped."""
    lhs_spec, rhs_spec, out_spec = dimension_numbers
    sp = lambda shape, spec: [shape[d] for d in spec[2:]]  # noqa: E731
    pads = _vjp_rhs_padding(sp(shape_of(lhs), lhs_spec), sp(shape_of(rhs), rhs_spec), window_strides,
                            sp(shape_of(ct), out_spec), padding, lhs_dilation, rhs_dilation)
    return conv_general_dilated(lhs, ct, window_strides=rhs_dilation, padding=pads, lhs_dilation=lhs_dilation,
                                rhs_dilation=window_strides,
                                dimension_numbers=(_swap(lhs_spec), _swap(out_spec), _swap(rhs_spec)),
                                feature_group_count=batch_group_count, batch_group_count=feature_group_count)


@def_vjp(conv_general_dilated_p)
def _conv_vjp(ct, lhs, rhs, *, out, active, **params):
    if np.prod(shape_of(ct)) == 0:
        return None, None
    ct_l = _transpose_lhs(ct, lhs, rhs, **params) if active[0] else None
    ct_r = _transpose_rhs(ct, lhs, rhs, **params) if active[1] else None
    return ct_l, ct_r


@def_jvp(conv_general_dilated_p)
def _conv_jvp(primals, tangents, **params):
    """Bilinear: conv(tx, w) + conv(x, tw), a term only for a tangent that is not zero (None)."""
    (x, w), (tx, tw) = primals, tangents
    conv = lambda a, b: conv_general_dilated_p.bind(a, b, **params)  # noqa: E731
    terms = ([conv(tx, w)] if tx is not None else []) + ([conv(x, tw)] if tw is not None else [])
    return conv(x, w), (None if not terms else terms[0] if len(terms) == 1 else P.add(*terms))


# --- batching (JAX's _conv_general_dilated_batch_rule) ------------------------------------------------

@def_batch(conv_general_dilated_p)
def _conv_batch(args, dims, **params):
    (lhs, rhs), (dl, dr) = args, dims
    lhs_spec, rhs_spec, out_spec = params["dimension_numbers"]
    fgc, bgc = params["feature_group_count"], params["batch_group_count"]
    bind = lambda a, b, **over: conv_general_dilated_p.bind(a, b, **{**params, **over})  # noqa: E731
    size = shape_of(lhs)[dl] if dl is not None else shape_of(rhs)[dr]
    if size == 0:  # no examples: the reshapes below would split an axis by 0 (JAX answers zeros too)
        drop = lambda x, d: ShapedArray(tuple(n for i, n in enumerate(shape_of(x)) if i != d), x.dtype)  # noqa: E731
        one = _conv_shape(drop(lhs, dl), drop(rhs, dr), **params)
        return P.full((0, *one.shape), 0, one.dtype), 0
    if dl is not None and dr is not None:
        size = shape_of(lhs)[dl]
        if bgc > 1:
            new_lhs, over = reshape_axis_into(dl, lhs_spec[0], lhs), {"batch_group_count": bgc * size}
        else:
            new_lhs, over = reshape_axis_into(dl, lhs_spec[1], lhs), {"feature_group_count": fgc * size}
        out = bind(new_lhs, reshape_axis_into(dr, rhs_spec[0], rhs), **over)
        return reshape_axis_out_of(out_spec[1], size, out), out_spec[1]
    if dl is not None:
        size = shape_of(lhs)[dl]
        if bgc == 1:
            out = bind(reshape_axis_into(dl, lhs_spec[0], lhs), rhs)
            return reshape_axis_out_of(out_spec[0], size, out), out_spec[0]
        new_lhs = reshape_axis_out_of(lhs_spec[0] + int(dl <= lhs_spec[0]), bgc, lhs)
        new_lhs = reshape_axis_into(dl + int(lhs_spec[0] < dl), lhs_spec[0] + 1, new_lhs)
        new_lhs = reshape_axis_into(lhs_spec[0], lhs_spec[0], new_lhs)
        out = bind(new_lhs, rhs)
        return reshape_axis_out_of(out_spec[0], size, out), out_spec[0]
    size = shape_of(rhs)[dr]
    if fgc == 1 and bgc == 1:
        out = bind(lhs, reshape_axis_into(dr, rhs_spec[0], rhs))
        return reshape_axis_out_of(out_spec[1], size, out), out_spec[1]
    # the groups stay the outer factor of rhs's output features, the vmapped axis goes inside them
    groups = max(fgc, bgc)
    new_rhs = reshape_axis_out_of(rhs_spec[0] + int(dr <= rhs_spec[0]), groups, rhs)
    new_rhs = reshape_axis_into(dr + int(rhs_spec[0] < dr), rhs_spec[0] + 1, new_rhs)
    new_rhs = reshape_axis_into(rhs_spec[0], rhs_spec[0], new_rhs)
    out = bind(lhs, new_rhs)
    out = reshape_axis_out_of(out_spec[1], groups, out)
    out = reshape_axis_out_of(out_spec[1] + 1, size, out)
    return reshape_axis_into(out_spec[1], out_spec[1] + 1, out), out_spec[1]
