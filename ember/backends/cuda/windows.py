"""WindowReduce steps (reduce_window_sum/max/min) as CUDA C: one thread per output element (a
grid-stride loop) folding its window's taps in row-major order from the fold's identity; a tap in
the padding or in a base-dilation hole contributes the identity. The fold is the elementwise
primitive's scalar rule (cuda/scalar.py), so NaN and integer wrapping behave as in fused loops."""

from __future__ import annotations

import numpy as np

from ember.backends.cuda import scalar as S
from ember.backends.cuda.conv import BLOCK, I, axis_exprs, element_loop, lit, load, store
from ember.backends.cuda.types import memory_type, register_type
from ember.backends.kernel import Op, WindowReduce, strides
from ember.tracer.primitive import primitives
from ember.tracer.prims.reduce import identity

_FOLD = {"add": "reduce_sum", "max": "reduce_max", "min": "reduce_min"}


def render_window_reduce(ctx, step: WindowReduce) -> None:
    """Append the kernel and the launch computing `step` to `ctx` (render._Context)."""
    x, out = ctx.buffers[step.operand], ctx.buffers[step.out]
    total = int(np.prod(out.shape, dtype=np.int64))
    if total == 0:
        return
    dt = x.dtype
    init = S.constant(identity(primitives[_FOLD[step.combine]], dt), dt)
    fold = S.emit_op(Op(step.combine, (0, 1), dt), ["acc", "v"], [dt, dt], ctx.out.need)
    axis = axis_exprs(out.shape)
    rt = register_type(dt)
    lines = [element_loop(total), f"    {rt} acc = {init};\n"]
    at, ok = [], []
    for j, k in enumerate(step.window_dimensions):
        (lo, _), s, bd, wd = step.padding[j], step.window_strides[j], step.base_dilation[j], step.window_dilation[j]
        pad = "  " * j
        lines.append(f"{pad}    for ({I} t{j} = 0; t{j} < {lit(k)}; ++t{j}) {{\n"
                     f"{pad}      const {I} q{j} = {axis[j]} * {lit(s)} + t{j} * {lit(wd)} - {lit(lo)};\n")
        ok.append(f"q{j} >= 0 && q{j} < {lit((x.shape[j] - 1) * bd + 1)}" + (f" && q{j} % {lit(bd)} == 0"
                                                                              if bd > 1 else ""))
        at.append(f"(q{j} / {lit(bd)}) * {lit(strides(x.shape)[j])}" if bd > 1
                  else f"q{j} * {lit(strides(x.shape)[j])}")
    inner = "  " * len(step.window_dimensions)
    value = load("x", " + ".join(at) or "0", dt)
    cond = " && ".join(ok) or "true"
    lines.append(f"{inner}    const {rt} v = ({cond}) ? ({rt}){value} : ({rt}){init};\n"
                 f"{inner}    acc = {fold};\n")
    lines += ["  " * j + "    }\n" for j in range(len(step.window_dimensions) - 1, -1, -1)]
    lines.append(f"    {store('out', 'p', 'acc', dt)}\n  }}\n")
    params = [(f"const {memory_type(dt)}* __restrict__", "x"), (f"{memory_type(out.dtype)}* __restrict__", "out")]
    ctx.out.launches.append(ctx.define("".join(lines), params, -(-total // BLOCK), [step.operand, step.out]))
