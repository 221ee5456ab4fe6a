"""WindowReduce steps (reduce_window_sum/max/min) as LLVM IR loops (loops.py dispatches them here).

Each output element folds its window's taps in row-major order from the fold's identity; a tap in
the padding or in a base-dilation hole reads the identity (its operand index is clamped, so the
load is always in bounds, and a select keeps the identity). The fold is the elementwise primitive's
scalar rule (add wraps ints; max and min propagate NaN, as their NumPy references).
"""

from __future__ import annotations

from collections.abc import Mapping

from llvmlite import ir

from ember.backends.kernel import Buffer, Op, WindowReduce, strides
from ember.backends.llvm import scalar
from ember.backends.llvm.conv import clamp_index, linear_offset, nest
from ember.backends.llvm.types import index, load, store
from ember.tracer.primitive import primitives
from ember.tracer.prims.reduce import identity


def emit_window_reduce(builder: ir.IRBuilder, step: WindowReduce, buffers: Mapping[str, Buffer],
                       ptrs: Mapping[str, ir.Value]) -> None:
    """Append the loops computing `step` into its out buffer at the builder's position."""
    x, out = buffers[step.operand], buffers[step.out]
    dt = x.dtype
    fold = {"add": "reduce_sum", "max": "reduce_max", "min": "reduce_min"}[step.combine]
    init = scalar.constant(identity(primitives[fold], dt), dt)
    x_st = strides(x.shape)
    src, dst = ptrs[step.operand], ptrs[step.out]

    def element(ix: list) -> None:
        def tap(taps: list, acc):
            offset, ok = index(0), None
            for j, (o, t) in enumerate(zip(ix, taps)):
                (lo, _), s, bd, wd = step.padding[j], step.window_strides[j], step.base_dilation[j], \
                    step.window_dilation[j]
                pos = builder.sub(builder.add(builder.mul(o, index(s)), builder.mul(t, index(wd))), index(lo))
                preds = [builder.icmp_signed(">=", pos, index(0)),
                         builder.icmp_signed("<", pos, index((x.shape[j] - 1) * bd + 1))]
                if bd > 1:
                    preds.append(builder.icmp_signed("==", builder.srem(pos, index(bd)), index(0)))
                    pos = builder.sdiv(pos, index(bd))
                offset = builder.add(offset, builder.mul(clamp_index(builder, pos, x.shape[j] - 1), index(x_st[j])))
                for p in preds:
                    ok = p if ok is None else builder.and_(ok, p)
            value = builder.select(ok, load(builder, src, offset, dt), init)
            return scalar.emit_op(builder, Op(step.combine, (0, 1), dt), [acc, value], [dt, dt])

        total = nest(builder, list(step.window_dimensions), tap, init)
        store(builder, total, dst, linear_offset(builder, ix, out.shape), dt)

    if 0 in x.shape:  # every window is padding: the identity
        nest(builder, list(out.shape), lambda ix: store(builder, init, dst, linear_offset(builder, ix, out.shape), dt))
    else:
        nest(builder, list(out.shape), element)
