"""The Cumulative and Sort steps of a kernel description as CUDA C (render.py's step rules).

Both map one thread to a row along the step's axis (a grid-stride loop over the rows): a cumulative
step carries its running value in a register, in the accumulator dtype; a sort merge-sorts a
permutation of the row's positions bottom-up in the step's scratch (two permutations per row, the
left run winning ties so the sort is stable), comparing keys through it in JAX's total order (NaNs
equal and last, -0.0 equal to 0.0), then gathers every operand through it.
"""

from __future__ import annotations

import numpy as np

from ember.backends.cuda import scalar as S
from ember.backends.cuda.types import register_type
from ember.backends.kernel import Cumulative, Op, Sort, acc_dtype
from ember.backends.schedule import GridPolicy


def _rows(shape, axis: int) -> tuple[int, int, int]:
    """(outer, n, inner): the row count before `axis`, its length, and the row stride."""
    return (int(np.prod(shape[:axis], dtype=np.int64)), shape[axis],
            int(np.prod(shape[axis + 1:], dtype=np.int64)))


def _read(name: str, at: str, dtype: np.dtype) -> str:
    """Element `at` of buffer `name` as a register value (float16 is stored as its bits)."""
    return f"ember_h2f({name}[{at}])" if dtype == np.float16 else f"{name}[{at}]"


def _write(name: str, at: str, value: str, dtype: np.dtype) -> str:
    return f"{name}[{at}] = {f'ember_f2h({value})' if dtype == np.float16 else value};"


def _combine(op: Op, need: set) -> str:
    """r combined with v: a float max/min orders -0.0 below 0.0 and propagates NaN, as JAX's scans;
    everything else is the primitive's scalar op."""
    if op.prim not in ("max", "min") or op.dtype.kind != "f":
        return S.emit_op(op, ["r", "v"], [op.dtype, op.dtype], need)
    cmp, tie = (">", "(signbit(r) ? v : r)") if op.prim == "max" else ("<", "(signbit(r) ? r : v)")
    return f"((r != r || v != v) ? r + v : (v {cmp} r ? v : (v == r ? {tie} : r)))"


def _launch_rows(ctx, rows: tuple[int, int, int], body: str, params: list, args: list) -> None:
    """Launch `body` once per row, in a grid-stride loop (thread `w`, `base` the flat index of its row's
    first element)."""
    outer, n, inner = rows
    text = (f"  for (long long w = (long long)blockIdx.x * blockDim.x + threadIdx.x; w < {outer * inner}LL; "
            "w += (long long)gridDim.x * blockDim.x) {\n"
            f"    const long long base = (w / {inner}LL) * {n * inner}LL + w % {inner}LL;\n" + body + "  }\n")
    ctx.out.launches.append(ctx.define(text, params, -(-outer * inner // GridPolicy().block), args))


def cumulative(ctx, step: Cumulative) -> None:
    """`step` as one thread per row carrying the running value (ctx: render's step context)."""
    x = ctx.buffers[step.operand]
    outer, n, inner = _rows(x.shape, step.axis)
    if not outer * n * inner:
        return
    dt, acc = x.dtype, acc_dtype(step.combine, x.dtype)
    rt = register_type(acc)
    combined = _combine(Op(step.combine, (0, 1), acc), ctx.out.need)
    at = f"base + {f'({n - 1}LL - k)' if step.reverse else 'k'} * {inner}LL"
    # a float sum starts from +0.0, as JAX's (a sum of -0.0s is +0.0)
    first = f"v + {S.constant(0.0, acc)}" if step.combine == "add" and acc.kind == "f" else "v"
    body = (f"    {rt} r = {S.constant(0, acc)};\n"
            f"    for (long long k = 0; k < {n}LL; ++k) {{\n"
            f"      const long long at = {at};\n"
            f"      const {rt} v = {S.convert(_read('x', 'at', dt), dt, acc)};\n"
            f"      r = k == 0 ? {first} : {combined};\n"
            f"      {_write('out', 'at', S.convert('r', acc, dt), dt)}\n"
            "    }\n")
    params = [(ctx.param(step.operand, False)[0], "x"), (ctx.param(step.out, True)[0], "out")]
    _launch_rows(ctx, (outer, n, inner), body, params, [step.operand, step.out])


def _key_less(a: str, b: str, dtype: np.dtype) -> str:
    """a < b in JAX's sort order: a NaN sorts after everything but a NaN (the ordered compare makes
    -0.0 equal to 0.0)."""
    if dtype.kind == "f":
        return f"({a} < {b} || ({a} == {a} && {b} != {b}))"
    return f"({a} < {b})"


def _less(keys: list[tuple[str, np.dtype]], inner: int) -> str:
    """A lambda comparing the elements at row positions p and q by the keys, lexicographically."""
    lines = ["    auto less = [&](long long p, long long q) -> bool {\n"]
    for m, (name, dt) in enumerate(keys):
        rt = register_type(dt)
        lines.append(f"      {{ const {rt} a = {_read(name, f'base + p * {inner}LL', dt)}; "
                     f"const {rt} b = {_read(name, f'base + q * {inner}LL', dt)};\n")
        if m == len(keys) - 1:
            lines.append(f"        return {_key_less('a', 'b', dt)}; }}\n")
        else:
            lines.append(f"        if ({_key_less('a', 'b', dt)}) return true; "
                         f"if ({_key_less('b', 'a', dt)}) return false; }}\n")
    lines.append("    };\n")
    return "".join(lines)


_MERGE = """    long long* src = perm + w * {two_n}LL;
    long long* dst = src + {n}LL;
    for (long long k = 0; k < {n}LL; ++k) src[k] = k;
    for (long long width = 1; width < {n}LL; width *= 2) {{
      for (long long lo = 0; lo < {n}LL; lo += 2 * width) {{
        const long long mid = lo + width < {n}LL ? lo + width : {n}LL;
        const long long hi = lo + 2 * width < {n}LL ? lo + 2 * width : {n}LL;
        long long i = lo, j = mid;
        for (long long k = lo; k < hi; ++k) {{
          const bool right = j < hi && (i >= mid || less(src[j], src[i]));
          dst[k] = right ? src[j++] : src[i++];
        }}
      }}
      long long* t = src; src = dst; dst = t;
    }}
"""


def _moved(m: int, dtype: np.dtype, inner: int) -> str:
    """Output m's element k: operand m's element at the permutation's position k."""
    return _write(f"y{m}", f"base + k * {inner}LL", _read(f"x{m}", f"base + src[k] * {inner}LL", dtype), dtype)


def sort(ctx, step: Sort) -> None:
    """`step` as one thread per row merge-sorting a permutation in scratch (ctx: render's step context)."""
    x = ctx.buffers[step.operands[0]]
    outer, n, inner = _rows(x.shape, step.dimension)
    if not outer * n * inner:
        return
    names = {b: f"x{m}" for m, b in enumerate(step.operands)}
    keys = [(names[b], ctx.buffers[b].dtype) for b in step.operands[:step.num_keys]]
    gather = "".join(f"      {_moved(m, ctx.buffers[b].dtype, inner)}\n" for m, b in enumerate(step.operands))
    body = (_less(keys, inner) + _MERGE.format(n=n, two_n=2 * n) +
            f"    for (long long k = 0; k < {n}LL; ++k) {{\n{gather}    }}\n")
    perm = ctx.scratch(np.int64, 2 * n * outer * inner)
    params = [(ctx.param(b, False)[0], names[b]) for b in step.operands]
    params += [(ctx.param(o, True)[0], f"y{m}") for m, o in enumerate(step.outs)]
    params.append(("long long* __restrict__", "perm"))
    _launch_rows(ctx, (outer, n, inner), body, params, [*step.operands, *step.outs, perm])
