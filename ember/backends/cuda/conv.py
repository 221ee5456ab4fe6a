"""Convolution steps as CUDA C: one kernel, one thread per output element (a grid-stride loop), each
summing its group's input features times its window taps, in that order, skipping the taps that
fall in padding or between the lhs-dilated elements. Float sums run in double (float64 ones fused
multiply-adds), integer ones wrap in their dtype as the reference's do. Correctness first: no shared
memory tiling and no cuDNN; a GPU runs the same text as the host C++ the tests check.
"""

from __future__ import annotations

import numpy as np

from ember.backends.cuda import scalar as S
from ember.backends.cuda.types import memory_type, register_type
from ember.backends.kernel import Convolution, Op, strides
from ember.backends.schedule import GridPolicy

_F64 = np.dtype(np.float64)
BLOCK = GridPolicy().block  # threads per block, as render.py launches every kernel
I = "long long"  # index arithmetic (the convolution kernels keep to one index type)


def lit(v: int) -> str:
    """An index literal."""
    return f"{int(v)}LL"


def element_loop(total: int) -> str:
    """A grid-stride loop over the flat output index p in [0, total) (the opening line)."""
    return (f"  for ({I} p = ({I})blockIdx.x * {BLOCK} + threadIdx.x; p < {lit(total)}; "
            f"p += ({I})gridDim.x * {BLOCK}) {{\n")


def axis_exprs(shape) -> list[str]:
    """Each axis index of the C-ordered `shape` as an expression of the flat index p."""
    return [f"((p / {lit(st)}) % {lit(n)})" for n, st in zip(shape, strides(shape))]


def load(name: str, at: str, dtype: np.dtype) -> str:
    return f"ember_h2f({name}[{at}])" if dtype == np.float16 else f"{name}[{at}]"


def store(name: str, at: str, value: str, dtype: np.dtype) -> str:
    return f"{name}[{at}] = ember_f2h({value});" if dtype == np.float16 else f"{name}[{at}] = {value};"


def render_convolution(ctx, step: Convolution) -> None:
    """Append the kernel and the launch computing `step` to `ctx` (render._Context)."""
    lhs, rhs, out = (ctx.buffers[b] for b in (step.lhs, step.rhs, step.out))
    total = int(np.prod(out.shape, dtype=np.int64))
    if total == 0:
        return
    lhs_spec, rhs_spec, out_spec = step.dimension_numbers
    groups = step.feature_group_count * step.batch_group_count
    per_group_out = rhs.shape[rhs_spec[0]] // groups
    in_features = rhs.shape[rhs_spec[1]]
    batch = out.shape[out_spec[0]]
    ls, rs = strides(lhs.shape), strides(rhs.shape)
    axis = axis_exprs(out.shape)
    lines = [element_loop(total),
             f"    const {I} n = {axis[out_spec[0]]};\n    const {I} o = {axis[out_spec[1]]};\n",
             f"    const {I} g = o / {lit(per_group_out)};\n"]
    nb = f"(g * {lit(batch)} + n)" if step.batch_group_count > 1 else "n"
    cf = f"(g * {lit(in_features)} + c)" if step.feature_group_count > 1 else "c"
    acc_t, init, fold, result = _accumulator(ctx, out.dtype)
    lines.append(f"    {acc_t} acc = {init};\n    for ({I} c = 0; c < {lit(in_features)}; ++c) {{\n")
    x_at = [f"{nb} * {lit(ls[lhs_spec[0]])}", f"{cf} * {lit(ls[lhs_spec[1]])}"]
    w_at = [f"o * {lit(rs[rhs_spec[0]])}", f"c * {lit(rs[rhs_spec[1]])}"]
    depth = 2
    for j, d in enumerate(rhs_spec[2:]):
        (lo, _), s, ld, rd = step.padding[j], step.window_strides[j], step.lhs_dilation[j], step.rhs_dilation[j]
        extent = (lhs.shape[lhs_spec[2 + j]] - 1) * ld + 1
        pad = "  " * depth
        lines.append(f"{pad}  for ({I} k{j} = 0; k{j} < {lit(rhs.shape[d])}; ++k{j}) {{\n"
                     f"{pad}    const {I} q{j} = {axis[out_spec[2 + j]]} * {lit(s)} + k{j} * {lit(rd)} - {lit(lo)};\n"
                     f"{pad}    if (q{j} < 0 || q{j} >= {lit(extent)}"
                     + (f" || q{j} % {lit(ld)} != 0" if ld > 1 else "") + ") continue;\n")
        x_at.append(f"(q{j} / {lit(ld)}) * {lit(ls[lhs_spec[2 + j]])}" if ld > 1
                    else f"q{j} * {lit(ls[lhs_spec[2 + j]])}")
        w_at.append(f"k{j} * {lit(rs[d])}")
        depth += 1
    a, b = load("lhs", " + ".join(x_at), lhs.dtype), load("rhs", " + ".join(w_at), rhs.dtype)
    lines.append("  " * depth + f"  {fold(a, b)}\n")
    lines += ["  " * k + "  }\n" for k in range(depth - 1, 0, -1)]
    lines.append(f"    {store('out', 'p', result, out.dtype)}\n  }}\n")
    params = [(f"const {memory_type(lhs.dtype)}* __restrict__", "lhs"),
              (f"const {memory_type(rhs.dtype)}* __restrict__", "rhs"),
              (f"{memory_type(out.dtype)}* __restrict__", "out")]
    ctx.out.launches.append(ctx.define("".join(lines), params, -(-total // BLOCK), [step.lhs, step.rhs, step.out]))


def _accumulator(ctx, dt: np.dtype):
    """(C type, initial value, fold(a, b) -> statement, result expression) of a sum of products in `dt`:
    floats in double (float64 by fma), integers wrapping in their own type."""
    if dt.kind == "f":
        if dt == _F64:
            return "double", "0.0", lambda a, b: f"acc = fma({a}, {b}, acc);", "acc"
        return "double", "0.0", lambda a, b: f"acc += (double){a} * (double){b};", S.convert("acc", _F64, dt)
    t = register_type(dt)
    mul = S.emit_op(Op("mul", (0, 1), dt), ["x", "y"], [dt, dt], ctx.out.need)
    add = S.emit_op(Op("add", (0, 1), dt), ["acc", f"({mul})"], [dt, dt], ctx.out.need)
    return t, S.constant(0, dt), lambda a, b: f"{{ const {t} x = {a}; const {t} y = {b}; acc = {add}; }}", "acc"
