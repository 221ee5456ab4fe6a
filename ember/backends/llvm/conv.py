"""Convolution steps as LLVM IR: im2col into scratch and dot.py's contraction (SciPy's BLAS gemm
above its threshold, its vector loops below), or a direct loop nest. The windows are arranged in
one of three ways (im2col, im2col_t, im2col_sum), each described below with its measurements.

im2col writes, per group g, the windows of the dilated, padded input as rows of a matrix
col[g, n, out..., k...] (the kernel-side axes k in rhs's memory order: I and the window), so the
kernel itself is read in place, its output features split as (groups, per group) without a copy;
the product col @ rhs gives res[g, n, out..., o], written straight into the step's output when that
is its layout (NHWC-like, one group), else into scratch and then scattered into the output's layout.
The col matrix (and res) live in the kernel's scratch, the plan's workspace: no call allocates.

The direct nest (`_direct_rows`) adds, per window tap, the tap's weight times a row of the input
to a row of the output along its contiguous spatial axis: vector code with no copy, but each tap
passes over the output once. im2col pays a copy of the windows and wins where the product per group
is large enough for the gemm; the direct nest wins where it is small (depthwise convolutions, a few
features per group). Measured on one core, float32, NCHW/OIHW, 32x32 images, batch 8, 3x3 windows
unless said: depthwise 16 groups (product 1 x 9): direct 0.29 ms, im2col 1.16 ms; 2 inputs per group
(1 x 18) 0.49 vs 2.3; 5x5 (1 x 25) 0.79 vs 2.9; 2 in, 2 out (2 x 18) 0.99 vs 2.7; one group 3 -> 16
(16 x 27) 0.86 vs 0.65; 4 -> 8 (8 x 36) 0.58 vs 0.35; 64 -> 64, 56x56, batch 1: 17.8 vs 8.2. So
(`method`): direct when the output's contiguous axis is spatial and a group's output features times
its window sum is at most DIRECT_MAX_PRODUCT, else an im2col arrangement. (Output features as the
contiguous axis, NHWC: rows along them measured slower than im2col everywhere, so im2col. These
measurements predate bands and im2col_t, which only made the im2col side faster.)

The windows' budget: a product's windows (col) take at most WINDOW_BYTES, 256 KiB (a quarter of a
core's L2 here): as many images (im2col_sum: input features) as fit, or, for an image whose windows
exceed it, bands of output rows of about that size, so the gemm reads col from cache right after it is
written and the kernel's scratch, a part of the executable's arena, stays small. A band keeps
BAND_MIN_ROWS rows (output positions) per product: sgemm of 64 x 576 by 576 x n takes 93 ms per 32
images at n = 6272 from memory, 74-77 at n = 256..1568 from cache, and below 256 rows the call's cost
shows; so the ResNet layer's (batch 32, 64 -> 64, 56x56, 3x3) 7 MiB of windows per image run in bands
of 5 rows (280 positions, 630 KiB). Bands against whole images, measured first with 2 MiB bands (one
core, float32, the ResNet layer): forward NHWC 109 -> 82 ms, NCHW 237 -> 158; input gradient NHWC 161
-> 117. The budget then went from 16 MiB chunks and 2 MiB bands to 256 KiB, measured interleaved in one
process (one core, float32, min of 5 / 40 runs): the ResNet layer NHWC forward 80.2 -> 79.9 ms, input
gradient 80.7 -> 80.6, kernel gradient 94.6 -> 94.3, gradient 278 -> 278; NCHW forward 94.8 -> 94.7,
input gradient 95.4 -> 95.3, kernel gradient 142.6 -> 144.3 (another run 147.1 -> 142.2: its plan is
unchanged, im2col_sum's one input feature at a time, whose 3.6 MB of windows have no band axis),
gradient 338 -> 338; 512 KiB and 1 MiB measured the same. The small layer (batch 8, 3 -> 16, 32x32) the
same within 1% (gradient NHWC 0.914 -> 0.909 ms, NCHW 0.649 -> 0.656), its gradient's arena 5,246,336
-> 785,792 B (the input gradient's windows were 8 images, 4.7 MB; XLA's temp for it is 1,146,880 B; 512
KiB gives 1,043,840).

im2col_t serves outputs laid out (batch, features, positions) (NCHW) with one group, where im2col's
result rows (position, features) go through scratch and a scatter, and its col rows (the kernel's
memory order: feature, then window) are only a window row long: per image and band, col holds
[(feature, window), positions] (rows along the output's contiguous axis, copied as runs) and the
kernel times col is the image's (features, positions), its output directly for a whole image, else
copied in rows. Measured on one core, float32: the ResNet layer NCHW forward 114 -> 98 ms (im2col
in bands -> im2col_t), input gradient 118 -> 103; the small layer (batch 8, 3 -> 16, 32x32) forward
0.65 -> 0.10 ms and input gradient 1.22 -> 0.22 (both from whole-batch im2col). So (`method`):
im2col_t wherever it applies (`transposable`) and neither direct nor im2col_sum is taken.

im2col_sum serves the kernel gradient's convolution (the VJP's, batch and feature roles swapped): its
window (the forward output, 56x56) is longer than its output (3x3), its input features are the
forward batch. im2col's rows would be (forward feature, 3x3 position) with the contraction over
(image, 56x56) gathered across lhs's strided axis, a product of 9 x 64 rows per chunk; im2col_sum
instead takes, per chunk of input features (images), col[(image, window), (position, batch)] (or
transposed, whichever reads lhs along its contiguous axis) and one gemm of (3x3 x 64) x (chunk x
56x56) x 64 whose result is the output's memory, summed into the output chunk by chunk. Measured on
one loaded core, float32, the ResNet layer's kernel gradient (batch 32, 64 -> 64, 56x56): NHWC 0.87 s
-> 0.21 s, NCHW 0.34 s -> 0.32 s. So (`method`): im2col_sum where it applies (`summable`) and the
window has more positions than SUM_MIN_WINDOW_RATIO times the output. Where the kernel operand's
axis 1 is a window axis (NHWC) an input feature's windows above WINDOW_BYTES run in bands of that
axis, as im2col's images do: NHWC 206 -> 140 ms; where it is the output features (NCHW) one input
feature per product reads the kernel operand in place (`chunk_features`).

End to end, the gradient of sum(tanh(conv(x, w) + b)**2) on one core (the ResNet layer, NHWC), timed
interleaved with jax.jit in each process: 0.54-0.59 s before these arrangements, 0.28-0.29 s after,
jax.jit 0.30-0.34 s; NCHW 0.61-0.70 s -> 0.35-0.44 s, jax.jit 0.45-0.52 s; the small layer NHWC
0.98 -> 0.93 ms (jax.jit 1.62), NCHW 2.3 -> 0.69 ms (jax.jit 1.63). What remains outside the
convolutions is mostly the bias gradient's reduce_sum.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np
from llvmlite import ir

from ember.backends.kernel import Buffer, Contraction, Convolution, strides
from ember.backends.llvm import dot
from ember.backends.llvm.types import I8, I64, index, load, memory_type, store

# the direct nest's limit on a group's product: output features x window sum (input features x window)
DIRECT_MAX_PRODUCT = 64
# im2col_sum is taken where the window has more positions than this times the output (the rule and its
# measurements in the module's docstring)
SUM_MIN_WINDOW_RATIO = 1
ALIGN = 64
_F16 = np.dtype(np.float16)


@dataclass(frozen=True)
class _Geometry:
    """A convolution in canonical terms: groups, per-group batch and features, spatial sizes, and
    the element strides of each operand's canonical axes."""

    groups: int
    batch: int  # output batch (lhs batch / batch_group_count)
    in_features: int  # per group
    out_features: int  # per group
    in_sp: tuple[int, ...]
    k_sp: tuple[int, ...]
    out_sp: tuple[int, ...]
    lhs_st: tuple[int, ...]  # strides of (batch, feature, spatial...)
    rhs_st: tuple[int, ...]  # strides of (out feature, in feature, spatial...)
    out_st: tuple[int, ...]  # strides of (batch, feature, spatial...)

    @property
    def window(self) -> int:
        return self.in_features * math.prod(self.k_sp)


def _geometry(step: Convolution, buffers: Mapping[str, Buffer]) -> _Geometry:
    ls, rs, os_ = (buffers[b].shape for b in (step.lhs, step.rhs, step.out))
    lhs_spec, rhs_spec, out_spec = step.dimension_numbers
    groups = step.feature_group_count * step.batch_group_count
    pick = lambda st, spec: tuple(st[d] for d in spec)  # noqa: E731
    return _Geometry(groups, os_[out_spec[0]], ls[lhs_spec[1]] // step.feature_group_count, rs[rhs_spec[0]] // groups,
                     tuple(ls[d] for d in lhs_spec[2:]), tuple(rs[d] for d in rhs_spec[2:]),
                     tuple(os_[d] for d in out_spec[2:]), pick(strides(ls), lhs_spec), pick(strides(rs), rhs_spec),
                     pick(strides(os_), out_spec))


def method(step: Convolution, buffers: Mapping[str, Buffer]) -> str:
    """nothing (an empty output), direct, im2col, im2col_sum or im2col_t (the rule in the module's
    docstring)."""
    if math.prod(buffers[step.out].shape) == 0:
        return "nothing"
    g = _geometry(step, buffers)
    small = g.out_features * g.window <= DIRECT_MAX_PRODUCT
    if small and vectorizable(step, buffers):
        return "direct"
    long_window = math.prod(g.k_sp) > SUM_MIN_WINDOW_RATIO * math.prod(g.out_sp)
    if long_window and summable(step, buffers):
        return "im2col_sum"
    return "im2col_t" if transposable(step, buffers) else "im2col"


# --- im2col: the plan of the product ---------------------------------------------------------------

_COL, _RHS, _RES = "conv.col", "conv.rhs", "conv.res"


@dataclass(frozen=True)
class _Im2col:
    """The product of a chunk of images (or of one image's band of output rows): the batch runs as a
    loop of chunks around it, so the workspace holds at most WINDOW_BYTES of windows, more only where
    BAND_MIN_ROWS rows take more (a ResNet layer's band: 630 KiB, of 7 MiB per image)."""

    col: Buffer  # (groups, images, out..., k...) with k the rhs axes (I, window) in rhs's memory order
    k_roles: tuple[int, ...]  # per k axis: -1 for the input feature, else the spatial axis
    product: Contraction
    buffers: dict  # the product's buffers: col, the kernel seen with its features split, res
    res_in_scratch: bool

    @property
    def scratch(self) -> int:
        return _plan_scratch(self)


def _plan_offsets(plan) -> tuple[int, int]:
    """Where an im2col plan (either layout) keeps things in scratch: its windows at 0, its product's
    result (where that lives in scratch) at the first offset, the product's own scratch at the second."""
    col = _align(math.prod(plan.col.shape) * plan.col.dtype.itemsize)
    res = plan.buffers[plan.product.out]
    return col, col + (_align(math.prod(res.shape) * res.dtype.itemsize) if plan.res_in_scratch else 0)


def _plan_scratch(plan) -> int:
    """Scratch bytes of an im2col plan: its windows, its result where in scratch, the product's own."""
    return _plan_offsets(plan)[1] + _align(dot.contraction_scratch_bytes(plan.product, plan.buffers))


# a product's windows: as many images (input features) as fit WINDOW_BYTES, or, where one takes more,
# bands of output rows of about that size (BLAS reads a band from cache), keeping at least BAND_MIN_ROWS
# rows (output positions) per product; the rule and its measurements are in the module's docstring
WINDOW_BYTES = 256 << 10
BAND_MIN_ROWS = 256


def chunk_images(step: Convolution, buffers: Mapping[str, Buffer]) -> int:
    """Images per product: as many as fit WINDOW_BYTES (at least one), so a short product (the kernel
    gradient's: 3x3 rows of a long sum) still gets rows enough for the gemm; one where an image is
    taken in bands (`band_rows`)."""
    g = _geometry(step, buffers)
    if g.out_sp and band_rows(step, buffers) < g.out_sp[0]:
        return 1
    return max(1, min(g.batch, WINDOW_BYTES // max(_image_bytes(step, buffers), 1)))


def band_rows(step: Convolution, buffers: Mapping[str, Buffer]) -> int:
    """Positions along the first output spatial axis per product: all of them, or, where one image's
    windows exceed WINDOW_BYTES, as many as fit it while the product keeps BAND_MIN_ROWS rows."""
    g = _geometry(step, buffers)
    if not g.out_sp or _image_bytes(step, buffers) <= WINDOW_BYTES:
        return g.out_sp[0] if g.out_sp else 1
    rest = math.prod(g.out_sp[1:])  # product rows per band row
    per_row = _image_bytes(step, buffers) // g.out_sp[0]
    rows = max(WINDOW_BYTES // max(per_row, 1), -(-BAND_MIN_ROWS // max(rest, 1)), 1)
    return min(g.out_sp[0], rows)


def _image_bytes(step: Convolution, buffers: Mapping[str, Buffer]) -> int:
    g = _geometry(step, buffers)
    return g.groups * math.prod(g.out_sp) * g.window * buffers[step.lhs].dtype.itemsize


def _im2col(step: Convolution, buffers: Mapping[str, Buffer], images: int, rows: int) -> _Im2col:
    """The plan of a product of `images` images' windows at `rows` positions of the first output axis."""
    g = _geometry(step, buffers)
    out_sp = (rows, *g.out_sp[1:]) if g.out_sp else ()
    lhs_spec, rhs_spec, out_spec = step.dimension_numbers
    rhs, dt = buffers[step.rhs], buffers[step.lhs].dtype
    nd = len(g.in_sp)
    k_axes = sorted((rhs_spec[1], *rhs_spec[2:]))  # the kernel's contracted axes in memory order
    k_roles = tuple(-1 if a == rhs_spec[1] else rhs_spec.index(a) - 2 for a in k_axes)
    col = Buffer(_COL, (g.groups, images, *out_sp, *(rhs.shape[a] for a in k_axes)), dt)
    o = rhs_spec[0]  # the kernel's output features become (groups, per group): the same memory
    split = Buffer(_RHS, rhs.shape[:o] + (g.groups, g.out_features) + rhs.shape[o + 1:], dt)
    moved = lambda a: a if a < o else a + 1  # noqa: E731
    direct_layout = g.groups == 1 and tuple(out_spec) == (0, nd + 1, *range(1, nd + 1))
    res = Buffer(step.out if direct_layout else _RES, (g.groups, images, *out_sp, g.out_features), dt)
    dn = ((tuple(range(2 + nd, 2 + nd + len(k_axes))), tuple(moved(a) for a in k_axes)), ((0,), (o,)))
    product = Contraction(_COL, _RHS, dn, res.name)
    return _Im2col(col, k_roles, product, {_COL: col, _RHS: split, res.name: res}, not direct_layout)


def _align(nbytes: int) -> int:
    return -(-nbytes // ALIGN) * ALIGN


def scratch_bytes(step: Convolution, buffers: Mapping[str, Buffer]) -> int:
    """Bytes of scratch `emit_convolution` needs: im2col's matrix, the product's result when it is
    not in the output's layout, and what the product itself needs."""
    how = method(step, buffers)
    if how == "im2col_sum":
        return _sum_plan(step, buffers, chunk_features(step, buffers), sum_band_rows(step, buffers)).scratch
    if how == "im2col":
        return _im2col(step, buffers, chunk_images(step, buffers), band_rows(step, buffers)).scratch
    if how == "im2col_t":
        return _t_plan(step, buffers, band_rows(step, buffers)).scratch
    return 0


# --- im2col_sum: the product over chunks of the input features, summed --------------------------------

@dataclass(frozen=True)
class _Sum:
    """The product of a chunk of input features: col holds, per feature of the chunk, the windows with
    the contraction (feature, window) on one side and the free (batch, output positions) on the other,
    in the output's order, so col's product with the kernel operand's chunk is the output's memory.
    `roles` names col's axes: ("i",) the chunk's feature, ("k", j) window axis j, ("s", j) output
    spatial axis j, ("b",) the batch."""

    col: Buffer
    roles: tuple[tuple, ...]
    product: Contraction
    buffers: dict

    @property
    def scratch(self) -> int:
        res = self.buffers[_RES]
        return (_align(math.prod(self.col.shape) * self.col.dtype.itemsize)
                + _align(math.prod(res.shape) * res.dtype.itemsize)
                + _align(dot.contraction_scratch_bytes(self.product, self.buffers)))


def summable(step: Convolution, buffers: Mapping[str, Buffer]) -> bool:
    """Whether im2col_sum applies: one group, not float16 (the reference sums float16 in one pass), the
    kernel operand's input features its outermost axis (a chunk of them is a contiguous piece of it)
    and the output's features its first or last axis (the product writes the output's memory)."""
    _, rhs_spec, out_spec = step.dimension_numbers
    return (step.feature_group_count == step.batch_group_count == 1 and buffers[step.out].dtype != _F16
            and rhs_spec[1] == 0 and out_spec[1] in (0, len(out_spec) - 1))


def chunk_features(step: Convolution, buffers: Mapping[str, Buffer]) -> int:
    """Input features per product of im2col_sum: as many as fit WINDOW_BYTES (at least one); one where a
    feature is taken in bands (`sum_band_rows`), or where the kernel operand's axis 1 is its output
    features (NCHW): one feature's window is then read in place, where for more dot.py would copy
    the chunk (measured, the ResNet layer's NCHW kernel gradient: 152 ms in chunks of 2, 133 in 1)."""
    g = _geometry(step, buffers)
    band = _sum_band_axis(step)
    if band is None or sum_band_rows(step, buffers) < g.k_sp[band]:
        return 1
    return max(1, min(g.in_features, WINDOW_BYTES // max(_feature_bytes(step, buffers), 1)))


def _feature_bytes(step: Convolution, buffers: Mapping[str, Buffer]) -> int:
    g = _geometry(step, buffers)
    return g.batch * math.prod(g.out_sp) * math.prod(g.k_sp) * buffers[step.lhs].dtype.itemsize


def _sum_band_axis(step: Convolution) -> int | None:
    """The window axis im2col_sum may take in bands: the kernel operand's axis 1 (a band of it, for one
    input feature, is a contiguous piece of the operand), when that is a window axis."""
    rhs_spec = step.dimension_numbers[1]
    return rhs_spec.index(1) - 2 if 1 in rhs_spec[2:] else None


def sum_band_rows(step: Convolution, buffers: Mapping[str, Buffer]) -> int:
    """Positions along the band axis per product of im2col_sum: all of them, or, where one input
    feature's windows exceed WINDOW_BYTES, as many as fit it while the product sums over at least
    BAND_MIN_ROWS terms (as `band_rows`)."""
    g = _geometry(step, buffers)
    j = _sum_band_axis(step)
    if j is None:
        return 1
    if _feature_bytes(step, buffers) <= WINDOW_BYTES:
        return g.k_sp[j]
    rest = math.prod(g.k_sp) // max(g.k_sp[j], 1)
    per_row = _feature_bytes(step, buffers) // max(g.k_sp[j], 1)
    rows = max(WINDOW_BYTES // max(per_row, 1), -(-BAND_MIN_ROWS // max(rest, 1)), 1)
    return min(g.k_sp[j], rows)


def _sum_plan(step: Convolution, buffers: Mapping[str, Buffer], features: int, rows: int) -> _Sum:
    """The plan of a product over `features` input features and `rows` positions of the band axis."""
    g = _geometry(step, buffers)
    _, rhs_spec, out_spec = step.dimension_numbers
    rhs, dt = buffers[step.rhs], buffers[step.lhs].dtype
    role_of = {out_spec[0]: ("b",), **{a: ("s", j) for j, a in enumerate(out_spec[2:])}}
    free = [role_of[a] for a in range(len(out_spec)) if a != out_spec[1]]
    contract = [("i",)] + [("k", rhs_spec.index(a) - 2) for a in sorted(rhs_spec[2:])]
    size = {("i",): features, ("b",): g.batch, **{("s", j): n for j, n in enumerate(g.out_sp)},
            **{("k", j): n for j, n in enumerate(g.k_sp)}}
    band = _sum_band_axis(step)
    if band is not None:
        size[("k", band)] = rows
    roles = contract + free if _lhs_step(step, g, free[-1]) <= _lhs_step(step, g, contract[-1]) else free + contract
    col = Buffer(_COL, tuple(size[r] for r in roles), dt)
    chunk = Buffer(_RHS, (features, *((rows,) if band is not None else rhs.shape[1:2]), *rhs.shape[2:]), dt)
    rhs_axes = tuple(0 if r == ("i",) else rhs_spec[2 + r[1]] for r in contract)
    col_axes = tuple(roles.index(r) for r in contract)
    o_first = out_spec[1] == 0
    res = Buffer(_RES, ((rhs.shape[rhs_spec[0]],) if o_first else ()) + tuple(size[r] for r in free)
                 + (() if o_first else (rhs.shape[rhs_spec[0]],)), dt)
    product = (Contraction(_RHS, _COL, ((rhs_axes, col_axes), ((), ())), _RES) if o_first
               else Contraction(_COL, _RHS, ((col_axes, rhs_axes), ((), ())), _RES))
    return _Sum(col, tuple(roles), product, {_COL: col, _RHS: chunk, _RES: res})


def _lhs_step(step: Convolution, g: _Geometry, role: tuple) -> int:
    """How far apart in lhs two neighbours along a col axis of this role are read (the innermost
    axis of col is chosen to be the one read most contiguously)."""
    if role[0] in "ib":
        return g.lhs_st[1 if role[0] == "i" else 0]
    move = step.window_strides if role[0] == "s" else step.rhs_dilation
    return g.lhs_st[2 + role[1]] * move[role[1]]


def _via_sum(builder, step: Convolution, buffers, ptrs, scratch) -> None:
    """out = 0, then per chunk of input features (or per feature and band of the band axis): their
    windows into col, the product into scratch, added to out (in the output's memory order); a last,
    shorter chunk or band after each loop."""
    g = _geometry(step, buffers)
    dt, total = buffers[step.out].dtype, math.prod(buffers[step.out].shape)
    _fill(builder, ptrs[step.out], total, dt)
    features, rows, band = chunk_features(step, buffers), sum_band_rows(step, buffers), _sum_band_axis(step)
    plan = lambda n, r: _sum_plan(step, buffers, n, r)  # noqa: E731
    run = lambda p, i0, r0: _sum_chunk(builder, step, g, p, i0, r0, ptrs, scratch, total)  # noqa: E731
    if band is not None and rows < g.k_sp[band]:
        full, rest = divmod(g.k_sp[band], rows)
        nest(builder, [g.in_features, full], lambda ix: run(plan(1, rows), ix[0], builder.mul(ix[1], index(rows))))
        if rest:
            nest(builder, [g.in_features], lambda ix: run(plan(1, rest), ix[0], index(full * rows)))
        return
    full, rest = divmod(g.in_features, features)
    nest(builder, [full], lambda ix: run(plan(features, rows), builder.mul(ix[0], index(features)), index(0)))
    if rest:
        run(plan(rest, rows), index(full * features), index(0))


def _sum_chunk(builder, step: Convolution, g: _Geometry, plan: _Sum, i0, r0, ptrs, scratch, total: int) -> None:
    """The input features from i0 on and band-axis positions from r0 on, as many as `plan` holds,
    added into the output."""
    dt = plan.col.dtype
    at = lambda offset: builder.gep(scratch, [index(offset)], inbounds=True, source_etype=I8)  # noqa: E731
    col_bytes = _align(math.prod(plan.col.shape) * dt.itemsize)
    res_bytes = _align(total * dt.itemsize)
    start = builder.mul(i0, index(g.rhs_st[1]))
    band = _sum_band_axis(step)
    if band is not None:
        start = builder.add(start, builder.mul(r0, index(g.rhs_st[2 + band])))
    chunk = builder.gep(ptrs[step.rhs], [start], inbounds=True, source_etype=memory_type(dt))
    _fill_sum_col(builder, step, g, plan, i0, {("k", band): r0} if band is not None else {}, ptrs[step.lhs], at(0))
    dot.emit_contraction(builder, plan.product, plan.buffers, {_COL: at(0), _RHS: chunk, _RES: at(col_bytes)},
                         at(col_bytes + res_bytes))
    _add_into(builder, dt, ptrs[step.out], at(col_bytes), total)


def _fill_sum_col(builder, step: Convolution, g: _Geometry, plan: _Sum, i0, shift: dict, src, dst) -> None:
    """col[.., i, k.., s.., b ..] (in `plan.roles` order) = the dilated, padded input of batch b, input
    feature i0 + i at output position s's window tap k (+ `shift`; 0 in padding or holes)."""
    fill_windows(builder, step, g, plan.col, plan.roles, lambda at: (at[("b",)], builder.add(i0, at[("i",)])),
                 src, dst, shift)


def _add_into(builder, dt, out, res, count: int) -> None:
    """out[t] += res[t] for t < count."""
    float_ = dt.kind == "f"

    def body(ix: list) -> None:
        a, b = load(builder, out, ix[0], dt), load(builder, res, ix[0], dt)
        store(builder, builder.fadd(a, b) if float_ else builder.add(a, b), out, ix[0], dt)

    nest(builder, [count], body)


# --- im2col_t: the windows transposed, per image, for outputs with features before positions ------------

@dataclass(frozen=True)
class _T:
    """The product of one image's band of output rows: col[(k...), (out...)] (the kernel's contracted
    axes in its memory order, then the band's positions), the kernel times col giving (features,
    positions), the output's memory for that image (NCHW) when the band is the whole image."""

    col: Buffer
    roles: tuple[tuple, ...]
    product: Contraction
    buffers: dict
    res_in_scratch: bool

    @property
    def scratch(self) -> int:
        return _plan_scratch(self)


def transposable(step: Convolution, buffers: Mapping[str, Buffer]) -> bool:
    """Whether im2col_t applies: one group, spatial axes, and the output laid out as (batch, features,
    positions...) in memory (NCHW), where im2col's rows of (position, features) need a scatter."""
    nd = len(buffers[step.out].shape) - 2
    return (step.feature_group_count == step.batch_group_count == 1 and nd > 0
            and tuple(step.dimension_numbers[2]) == tuple(range(nd + 2)))


def _t_plan(step: Convolution, buffers: Mapping[str, Buffer], rows: int) -> _T:
    g = _geometry(step, buffers)
    _, rhs_spec, _ = step.dimension_numbers
    rhs, dt = buffers[step.rhs], buffers[step.lhs].dtype
    nd = len(g.in_sp)
    k_axes = sorted((rhs_spec[1], *rhs_spec[2:]))
    roles = (("b",), *(("i",) if a == rhs_spec[1] else ("k", rhs_spec.index(a) - 2) for a in k_axes),
             *(("s", j) for j in range(nd)))
    out_sp = (rows, *g.out_sp[1:])
    col = Buffer(_COL, (1, *(rhs.shape[a] for a in k_axes), *out_sp), dt)
    whole = rows == g.out_sp[0]
    res = Buffer(step.out if whole else _RES, (g.out_features, *out_sp), dt)
    dn = ((tuple(k_axes), tuple(range(1, 1 + len(k_axes)))), ((), ()))
    product = Contraction(_RHS, _COL, dn, res.name)
    # the product's out is one image of step.out: its buffer seen as that image (the pointer is offset)
    return _T(col, roles, product, {_COL: col, _RHS: Buffer(_RHS, rhs.shape, dt), res.name: res}, not whole)


def _via_t(builder, step: Convolution, buffers, ptrs, scratch) -> None:
    """Per image and band of output rows: the windows into col, the product, written into the image's
    output (through scratch, then row by row, when the band is not the whole image)."""
    g = _geometry(step, buffers)
    rows = band_rows(step, buffers)
    full, rest = divmod(g.out_sp[0], rows)
    nest(builder, [g.batch, full], lambda ix: _t_band(builder, step, g, _t_plan(step, buffers, rows), ix[0],
                                                      builder.mul(ix[1], index(rows)), ptrs, scratch))
    if rest:
        nest(builder, [g.batch], lambda ix: _t_band(builder, step, g, _t_plan(step, buffers, rest), ix[0],
                                                    index(full * rows), ptrs, scratch))


def _t_band(builder, step: Convolution, g: _Geometry, plan: _T, n, r0, ptrs, scratch) -> None:
    dt = plan.col.dtype
    at = lambda offset: builder.gep(scratch, [index(offset)], inbounds=True, source_etype=I8)  # noqa: E731
    res_at, own_at = _plan_offsets(plan)
    res = plan.buffers[plan.product.out]
    image = builder.gep(ptrs[step.out], [builder.mul(n, index(g.out_st[0]))], inbounds=True,
                        source_etype=memory_type(dt))
    into = at(res_at) if plan.res_in_scratch else image
    fill_windows(builder, step, g, plan.col, plan.roles, lambda a: (builder.add(n, a[("b",)]), a[("i",)]),
                 ptrs[step.lhs], at(0), {("s", 0): r0})
    dot.emit_contraction(builder, plan.product, plan.buffers, {_COL: at(0), _RHS: ptrs[step.rhs], res.name: into},
                         at(own_at))
    if plan.res_in_scratch:
        _copy_band(builder, g, dt, res.shape, r0, into, image)


def _copy_band(builder, g: _Geometry, dt, shape, r0, res, image) -> None:
    """image[o, r0 + r, rest...] = res[o, r, rest...]: rows of contiguous positions."""
    inner = math.prod(shape[2:])

    def body(ix: list) -> None:
        o, r, t = ix
        src = builder.add(builder.mul(builder.add(builder.mul(o, index(shape[1])), r), index(inner)), t)
        dst = builder.add(builder.add(builder.mul(o, index(g.out_st[1])), builder.mul(builder.add(r0, r),
                                                                                      index(g.out_st[2]))), t)
        store(builder, load(builder, res, src, dt), image, dst, dt)

    nest(builder, [shape[0], shape[1], inner], body)


# --- emission ---------------------------------------------------------------------------------------

def emit_convolution(builder: ir.IRBuilder, step: Convolution, buffers: Mapping[str, Buffer],
                     ptrs: Mapping[str, ir.Value], scratch: ir.Value) -> None:
    """Emit IR at `builder` computing `step` into its out buffer; `scratch` holds
    `scratch_bytes(step, buffers)` bytes, 64-byte aligned."""
    how = method(step, buffers)
    if how == "direct":
        _direct(builder, step, buffers, ptrs)
    elif how == "im2col":
        _via_product(builder, step, buffers, ptrs, scratch)
    elif how == "im2col_sum":
        _via_sum(builder, step, buffers, ptrs, scratch)
    elif how == "im2col_t":
        _via_t(builder, step, buffers, ptrs, scratch)


def _via_product(builder, step: Convolution, buffers, ptrs, scratch) -> None:
    """Per chunk of images (or per image and band of output rows): their windows into col, the
    product, the result into the output (through scratch when the output's layout is not the
    product's); a last, shorter chunk or band after each loop."""
    g = _geometry(step, buffers)
    images, rows = chunk_images(step, buffers), band_rows(step, buffers)
    plan = lambda n, r: _im2col(step, buffers, n, r)  # noqa: E731
    if g.out_sp and rows < g.out_sp[0]:
        full, rest = divmod(g.out_sp[0], rows)
        nest(builder, [g.batch, full], lambda ix: _chunk(builder, step, g, plan(1, rows), ix[0],
                                                         builder.mul(ix[1], index(rows)), ptrs, scratch))
        if rest:
            nest(builder, [g.batch], lambda ix: _chunk(builder, step, g, plan(1, rest), ix[0], index(full * rows),
                                                       ptrs, scratch))
        return
    full, rest = divmod(g.batch, images)
    nest(builder, [full], lambda ix: _chunk(builder, step, g, plan(images, rows), builder.mul(ix[0], index(images)),
                                            index(0), ptrs, scratch))
    if rest:
        _chunk(builder, step, g, plan(rest, rows), index(full * images), index(0), ptrs, scratch)


def _chunk(builder, step: Convolution, g: _Geometry, plan: _Im2col, n0, r0, ptrs, scratch) -> None:
    """The images from n0 on and first-axis output positions from r0 on, as many as `plan` holds."""
    dt = plan.col.dtype
    at = lambda offset: builder.gep(scratch, [index(offset)], inbounds=True, source_etype=I8)  # noqa: E731
    res_at, own_at = _plan_offsets(plan)
    res = plan.buffers[plan.product.out]
    start = builder.mul(n0, index(g.out_st[0]))
    if g.out_sp:
        start = builder.add(start, builder.mul(r0, index(g.out_st[2])))
    into = at(res_at) if plan.res_in_scratch else builder.gep(ptrs[step.out], [start], inbounds=True,
                                                                 source_etype=memory_type(dt))
    own = {_COL: at(0), _RHS: ptrs[step.rhs], res.name: into}
    _fill_col(builder, step, g, plan, n0, r0, ptrs[step.lhs], own[_COL])
    dot.emit_contraction(builder, plan.product, plan.buffers, own, at(own_at))
    if plan.res_in_scratch:
        _scatter_result(builder, g, dt, n0, r0, res.shape, into, ptrs[step.out])


def _fill_col(builder, step: Convolution, g: _Geometry, plan: _Im2col, n0, r0, src, dst) -> None:
    """col[g, i, out..., k...] = image n0 + i's dilated, padded input at that window tap, the first
    output axis from r0 on (0 in padding or holes)."""
    nd = len(g.in_sp)
    roles = (("g",), ("b",), *(("s", j) for j in range(nd)), *(("i",) if r < 0 else ("k", r) for r in plan.k_roles))

    def batch_feature(at: dict) -> tuple:
        grp, n = at[("g",)], builder.add(n0, at[("b",)])
        batch = _plus(builder, n, grp, g.batch) if step.batch_group_count > 1 else n
        feature = _plus(builder, at[("i",)], grp, g.in_features) if step.feature_group_count > 1 else at[("i",)]
        return batch, feature

    fill_windows(builder, step, g, plan.col, roles, batch_feature, src, dst, {("s", 0): r0} if nd else {})


def fill_windows(builder, step: Convolution, g: _Geometry, col: Buffer, roles: tuple, batch_feature: Callable,
                 src, dst, shift: Mapping | None = None) -> None:
    """col (its axes named by `roles`: ("b",) batch, ("i",) input feature, ("s", j) output position and
    ("k", j) window tap along spatial axis j, ("g",) group; `shift` adds to a role's index) = the
    dilated, padded input there, 0 in padding or holes; `batch_feature(indices by role)` gives the
    lhs batch and feature. Rows along the
    last axis are a run of zeros, a strided copy and zeros (their bounds computed once per row): vector
    code, where a test per element is not (measured: the ResNet layer's NHWC kernel-gradient windows,
    231 MB, 0.4 s per element, 0.1 s in rows); an lhs-dilated last axis tests each element."""
    last = roles[-1]
    shift = shift or {}
    if last[0] in "sk" and step.lhs_dilation[last[1]] != 1:
        _fill_elements(builder, step, g, col, roles, batch_feature, src, dst, shift)
        return
    dt, nd, length = col.dtype, len(g.in_sp), col.shape[-1]
    zero = ir.Constant(memory_type(dt), 0)
    spatial = (last[1],) if last[0] in "sk" else ()
    others = [a for a in range(nd) if a not in spatial]

    def row(ix: list) -> None:
        at = _shifted(builder, {**dict(zip(roles[:-1], ix)), last: index(0)}, shift)
        batch, feature = batch_feature(at)
        offset, ok = _tap(builder, step, g, batch, feature, [at[("s", a)] for a in others],
                          [at[("k", a)] for a in others], others)
        if spatial:
            start, stop, offset, src_step = _row_range(builder, step, g, last, at, offset, length)
        else:
            start, stop, src_step = index(0), index(length), g.lhs_st[0 if last == ("b",) else 1]
        if ok is not None:
            stop = builder.select(ok, stop, start)
        row_at = linear_offset(builder, ix + [index(0)], col.shape)
        put = lambda t, v: store(builder, v, dst, builder.add(row_at, t), dt)  # noqa: E731
        _range(builder, index(0), start, lambda t: put(t, zero))
        _range(builder, start, stop,
               lambda t: put(t, load(builder, src, builder.add(offset, builder.mul(t, index(src_step))), dt)))
        _range(builder, stop, index(length), lambda t: put(t, zero))

    nest(builder, list(col.shape[:-1]), row)


def _row_range(builder, step: Convolution, g: _Geometry, last: tuple, at: dict, offset, length: int):
    """(start, stop, lhs offset of element 0, lhs step) of a row along spatial axis j, as a window tap
    (("k", j): position = s * stride + t * rhs_dilation - lo) or an output position (("s", j)), from
    at[last] on: the elements in [start, stop) read the input, the others its padding."""
    j = last[1]
    (lo, _), n, stride, rd = step.padding[j], g.in_sp[j], step.window_strides[j], step.rhs_dilation[j]
    fixed_of, move = (("s", stride), rd) if last[0] == "k" else (("k", rd), stride)
    fixed = builder.sub(builder.mul(at[(fixed_of[0], j)], index(fixed_of[1])), index(lo))
    fixed = builder.add(fixed, builder.mul(at[last], index(move)))  # a shifted row starts further on
    start = _min(builder, _max(builder, index(0), _ceil_div(builder, builder.neg(fixed), move)), index(length))
    stop = _min(builder, index(length), builder.add(_floor_div(builder, builder.sub(index(n - 1), fixed), move),
                                                    index(1)))
    stop = _max(builder, stop, start)
    return start, stop, builder.add(offset, builder.mul(fixed, index(g.lhs_st[2 + j]))), move * g.lhs_st[2 + j]


def _shifted(builder, at: dict, shift: Mapping) -> dict:
    return {r: builder.add(i, shift[r]) if r in shift else i for r, i in at.items()}


def _fill_elements(builder, step: Convolution, g: _Geometry, col: Buffer, roles: tuple, batch_feature: Callable,
                   src, dst, shift: Mapping) -> None:
    """fill_windows one element at a time, each tested for padding and holes."""
    dt, nd = col.dtype, len(g.in_sp)
    zero = ir.Constant(memory_type(dt), 0)

    def body(ix: list) -> None:
        at = _shifted(builder, dict(zip(roles, ix)), shift)
        batch, feature = batch_feature(at)
        offset, ok = _tap(builder, step, g, batch, feature, [at[("s", j)] for j in range(nd)],
                          [at[("k", j)] for j in range(nd)])
        value = load(builder, src, offset, dt)
        store(builder, builder.select(ok, value, zero) if ok is not None else value, dst,
              linear_offset(builder, ix, col.shape), dt)

    nest(builder, list(col.shape), body)


def _tap(builder, step: Convolution, g: _Geometry, batch, feature, out: list, taps: list, axes=None):
    """(lhs element offset, in-range predicate or None) of the input element that output position `out`
    reads at window tap `taps` (along spatial `axes`, by default all): position = out * stride + tap *
    rhs_dilation - pad_lo in the dilated input, a real element where it is in range and on the
    lhs_dilation grid. The offset is clamped so it may be loaded unconditionally."""
    offset = builder.add(builder.mul(batch, index(g.lhs_st[0])), builder.mul(feature, index(g.lhs_st[1])))
    preds = []
    for j, o, t in zip(range(len(out)) if axes is None else axes, out, taps):
        (lo, _), ld, n = step.padding[j], step.lhs_dilation[j], g.in_sp[j]
        pos = builder.sub(builder.add(builder.mul(o, index(step.window_strides[j])),
                                      builder.mul(t, index(step.rhs_dilation[j]))), index(lo))
        extent = (n - 1) * ld + 1
        preds += [builder.icmp_signed(">=", pos, index(0)), builder.icmp_signed("<", pos, index(extent))]
        if ld > 1:
            preds.append(builder.icmp_signed("==", builder.srem(pos, index(ld)), index(0)))
            pos = builder.sdiv(pos, index(ld))
        clamped = clamp_index(builder, pos, n - 1)
        offset = builder.add(offset, builder.mul(clamped, index(g.lhs_st[2 + j])))
    ok = None
    for p in preds:
        ok = p if ok is None else builder.and_(ok, p)
    return offset, ok


def clamp_index(builder, i, hi: int):
    low = builder.select(builder.icmp_signed("<", i, index(0)), index(0), i)
    return builder.select(builder.icmp_signed(">", low, index(hi)), index(hi), low)


def _plus(builder, i, group, size: int):
    """group * size + i: an index within a group made global."""
    return builder.add(builder.mul(group, index(size)), i)


def _scatter_result(builder, g: _Geometry, dt, n0, r0, shape, res, out) -> None:
    """out[n0 + i, g * per group + o, r0 + out0, out...] (in the output's layout) = res[g, i, out..., o]."""
    shape = list(shape)

    def body(ix: list) -> None:
        grp, n, sp, o = ix[0], builder.add(n0, ix[1]), list(ix[2:-1]), ix[-1]
        if sp:
            sp[0] = builder.add(sp[0], r0)
        offset = builder.add(builder.mul(n, index(g.out_st[0])),
                             builder.mul(_plus(builder, o, grp, g.out_features), index(g.out_st[1])))
        for j, i in enumerate(sp):
            offset = builder.add(offset, builder.mul(i, index(g.out_st[2 + j])))
        store(builder, load(builder, res, linear_offset(builder, ix, shape), dt), out, offset, dt)

    nest(builder, shape, body)


def vectorizable(step: Convolution, buffers: Mapping[str, Buffer]) -> bool:
    """Whether the direct nest applies: the output's contiguous (last) axis is a spatial one, not
    lhs-dilated, and the dtype is not float16 (the nest sums in the output buffer)."""
    out_spec = step.dimension_numbers[2]
    last = len(buffers[step.out].shape) - 1
    if buffers[step.out].dtype == _F16 or out_spec[1] == last or out_spec[0] == last:
        return False
    return step.lhs_dilation[list(out_spec[2:]).index(last)] == 1


def _direct(builder, step: Convolution, buffers, ptrs) -> None:
    """out = 0, then for each output row (all axes but the contiguous last one, a spatial axis) and
    each window tap (input feature of the group, window position), the row += tap weight x input row
    over the tap's valid range of the row (computed: no test per element), a loop over contiguous
    memory that LLVM vectorizes."""
    g = _geometry(step, buffers)
    dt = buffers[step.out].dtype
    out_shape = buffers[step.out].shape
    _fill(builder, ptrs[step.out], math.prod(out_shape), dt)
    if g.window:
        _direct_rows(builder, step, g, dt, ptrs)


def _fill(builder, ptr, count: int, dt) -> None:
    zero = ir.Constant(memory_type(dt), 0)
    nest(builder, [count], lambda ix: store(builder, zero, ptr, ix[0], dt))


def _axpy(builder, dt, out, out_at, out_step, src, src_at, src_step, scale, start, stop) -> None:
    """out[out_at + i * out_step] += scale * src[src_at + i * src_step] for i in [start, stop)."""
    float_ = dt.kind == "f"

    def body(i):
        o = builder.add(out_at, builder.mul(i, index(out_step)))
        x = load(builder, src, builder.add(src_at, builder.mul(i, index(src_step))), dt)
        term = builder.fmul(scale, x) if float_ else builder.mul(scale, x)
        old = load(builder, out, o, dt)
        store(builder, builder.fadd(old, term) if float_ else builder.add(old, term), out, o, dt)

    _range(builder, start, stop, body)


def _direct_rows(builder, step: Convolution, g: _Geometry, dt, ptrs) -> None:
    """Rows along the contiguous spatial axis j: out[n, o, .., :] += w[o, c, tap] * x[n, c, .., tap's
    valid positions], the range of output positions whose input lies inside (not in the padding)."""
    lhs, rhs, out = ptrs[step.lhs], ptrs[step.rhs], ptrs[step.out]
    out_spec = step.dimension_numbers[2]
    nd = len(g.out_sp)
    j = list(out_spec[2:]).index(len(out_spec) - 1)
    others = [a for a in range(nd) if a != j]
    zero = ir.Constant(memory_type(dt), 0)
    (lo, _), s, rd = step.padding[j], step.window_strides[j], step.rhs_dilation[j]

    def row(ix: list) -> None:
        n, o = ix[0], ix[1]
        sp_other, c, taps = ix[2:1 + nd], ix[1 + nd], ix[2 + nd:]
        sp = dict(zip(others, sp_other))
        sp[j] = index(0)  # position 0 of the row: the offsets below are its start
        grp = builder.udiv(o, index(g.out_features))
        batch = _plus(builder, n, grp, g.batch) if step.batch_group_count > 1 else n
        feature = _plus(builder, c, grp, g.in_features) if step.feature_group_count > 1 else c
        w_at = builder.add(builder.mul(o, index(g.rhs_st[0])), builder.mul(c, index(g.rhs_st[1])))
        for a, t in enumerate(taps):
            w_at = builder.add(w_at, builder.mul(t, index(g.rhs_st[2 + a])))
        w = load(builder, rhs, w_at, dt)
        # the other axes' taps: in range and on the lhs-dilation grid, else the row adds nothing
        offset, ok = _tap(builder, step, g, batch, feature, [sp[a] for a in others], [taps[a] for a in others],
                          others)
        w = builder.select(ok, w, zero) if ok is not None else w
        shift = builder.sub(builder.mul(taps[j], index(rd)), index(lo))  # input position of output position 0
        start = _max(builder, index(0), _ceil_div(builder, builder.neg(shift), s))
        stop = _min(builder, index(g.out_sp[j]),
                    builder.add(_floor_div(builder, builder.sub(index(g.in_sp[j] - 1), shift), s), index(1)))
        src_at = builder.add(offset, builder.mul(shift, index(g.lhs_st[2 + j])))
        out_at = builder.add(builder.mul(n, index(g.out_st[0])), builder.mul(o, index(g.out_st[1])))
        for a in others:
            out_at = builder.add(out_at, builder.mul(sp[a], index(g.out_st[2 + a])))
        _axpy(builder, dt, out, out_at, g.out_st[2 + j], lhs, src_at, s * g.lhs_st[2 + j], w, start, stop)

    nest(builder, [g.batch, g.groups * g.out_features, *(g.out_sp[a] for a in others), g.in_features, *g.k_sp],
          row)


def _floor_div(builder, a, s: int):
    """floor(a / s) for a positive constant s (sdiv truncates towards zero)."""
    if s == 1:
        return a
    neg = builder.icmp_signed("<", a, index(0))
    return builder.sdiv(builder.select(neg, builder.sub(a, index(s - 1)), a), index(s))


def _ceil_div(builder, a, s: int):
    return _floor_div(builder, builder.add(a, index(s - 1)), s)


def _max(builder, a, b):
    return builder.select(builder.icmp_signed(">", a, b), a, b)


def _min(builder, a, b):
    return builder.select(builder.icmp_signed("<", a, b), a, b)


# --- loops ------------------------------------------------------------------------------------------

def linear_offset(builder, ix: list, shape) -> ir.Value:
    """The row-major offset of index `ix` in `shape`."""
    offset = index(0)
    for i, s in zip(ix, strides(shape)):
        offset = builder.add(offset, builder.mul(i, index(s)))
    return offset


def nest(builder: ir.IRBuilder, sizes: list, body: Callable, carry: ir.Value | None = None):
    """Nested counted loops over `sizes` (outer first, each size >= 1); `body(indices)` runs
    innermost, or with `carry` `carry = body(indices, carry)`, whose final value is returned (no
    iteration when a size is 0)."""
    if 0 in sizes:
        return carry

    def level(depth: int, ix: list, value):
        if depth == len(sizes):
            return body(ix) if carry is None else body(ix, value)
        return _for(builder, sizes[depth], lambda i, v: level(depth + 1, ix + [i], v), value)

    return level(0, [], carry)


def _range(builder: ir.IRBuilder, start: ir.Value, stop: ir.Value, body: Callable) -> None:
    """for i in [start, stop) with bounds known at run time (none when stop <= start): body(i)."""
    pre = builder.block
    head = builder.append_basic_block("conv.range")
    work = builder.append_basic_block("conv.range.body")
    done = builder.append_basic_block("conv.range.done")
    builder.branch(head)
    builder.position_at_end(head)
    i = builder.phi(I64)
    i.add_incoming(start, pre)
    builder.cbranch(builder.icmp_signed("<", i, stop), work, done)
    builder.position_at_end(work)
    body(i)
    i.add_incoming(builder.add(i, index(1), flags=("nsw",)), builder.block)
    builder.branch(head)
    builder.position_at_end(done)


def _for(builder: ir.IRBuilder, n: int, body: Callable, carry: ir.Value | None):
    """for i in range(n) (n >= 1, bottom-tested): carry = body(i, carry); the final carry."""
    pre = builder.block
    loop = builder.append_basic_block("conv.loop")
    builder.branch(loop)
    builder.position_at_end(loop)
    i = builder.phi(I64)
    i.add_incoming(index(0), pre)
    phi = None
    if carry is not None:
        phi = builder.phi(carry.type)
        phi.add_incoming(carry, pre)
    new = body(i, phi)
    nxt = builder.add(i, index(1), flags=("nuw", "nsw"))
    i.add_incoming(nxt, builder.block)
    if phi is not None:
        phi.add_incoming(new, builder.block)
    done = builder.append_basic_block("conv.done")
    builder.cbranch(builder.icmp_unsigned("<", nxt, index(n)), loop, done)
    builder.position_at_end(done)
    return new

