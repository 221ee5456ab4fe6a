"""How a kernel's loops run, decided once for every renderer (LLVM IR now, CUDA C next).

`schedule_loop(loop, buffers, policy)` turns a `Loop` step of a kernel description (kernel.py) into
a `LoopSchedule`, the loop nest a renderer writes out without deciding anything:

- levels: the loop's axes of extent > 1, row-major with the last axis innermost, adjacent axes that
  every index form reads alike (linear in them with matching strides) collapsed into one level; in
  register mode the reduced axes go innermost;
- the accumulator mode: reductions accumulate in registers when the innermost level is reduced
  (float sums then run that level in blocks of `BLOCK` folded into a compensated float64 total, float
  max/min keep a NaN flag beside a plain compare), else in memory over the kept index: the output, or
  scratch when the accumulator dtype differs from the output's;
- the hoisting depth of each op: the outermost level at which all its inputs are known;
- the thread split (`Split`): chunks of one level, by the loop's shape and ops alone and the
  renderer's `SplitPolicy` (never the thread count, so results are bitwise identical for any), with
  one partial result per chunk in scratch when the split level is reduced;
- the scratch layout: memory accumulators first (each 64-byte aligned), then the per-chunk partials.

A GPU renderer maps a Loop onto threads with `gpu_grid(loop, policy)`: elementwise loops one point per
thread (grid-stride), reductions as work items of `lanes` cooperating threads (1, a warp or a block)
over one kept index and one chunk of the reduced space, each chunk's partial result combined by a second
stage in chunk order; decided by shape alone, so results never depend on the device or the grid.
`no_alias` says which pointers a renderer may mark noalias, from the pairs the call passes one
buffer for and the kernel's own `Kernel.shareable` (derived once, by `kernel.lower_kernel`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ember.backends import kernel_index as ix
from ember.backends.kernel import Kernel, Loop
from ember.backends.kernel_index import Ix

BLOCK = 256  # float sums: elements per block summed in registers before the float64 total
# memory mode: a chunk of a kept level inside a reduced one walks every reduced row for its columns, so
# it takes at least this many contiguous elements of a row (a chunk of one column of a (100352, 64) column
# sum read one float per 256-byte row: 64 chunks of one column took 21 ms, the unsplit loop 0.5 ms)
ROW_SEGMENT = 256
PARTIAL_SLOT = 24  # bytes of scratch per reduction and chunk: total (8), compensation (8), NaN flag
ALIGN = 64  # scratch regions start at this alignment
# ops that cost nothing per iteration in the split's measure of work
FREE_OPS = ("load", "const", "index", "convert_element_type", "broadcast_in_dim", "reshape")


@dataclass(frozen=True)
class SplitPolicy:
    """When a loop runs in chunks, set by the renderer's threads' dispatch cost: a loop whose work
    (iterations times computing ops, at least one) reaches `min_work` splits into chunks of at least
    `min_chunk_work`, at most `max_chunks` of them."""

    min_work: int
    min_chunk_work: int
    max_chunks: int


@dataclass(frozen=True)
class Level:
    """One loop of the nest: the loop axes it runs over (collapsed, outer to inner) and its extent."""

    axes: tuple[int, ...]
    extent: int
    block: int = 0  # > 0: run in blocks of this many iterations (float sums)


@dataclass(frozen=True)
class Split:
    """How a loop runs on the thread pool: nest level `level` in `chunks` chunks of `chunk` iterations
    (each chunk runs the levels outside it whole); `partial`: that level is reduced (a whole-array
    reduction), so each chunk keeps partial results in scratch."""

    chunk: int
    chunks: int
    partial: bool
    level: int = 0


@dataclass(frozen=True)
class LoopSchedule:
    """The loop nest a Loop step runs as. Op depth d means: computed inside levels[:d] (0: before the
    first level); the register accumulators open at depth `reduce_level`."""

    memory: bool  # reductions accumulate in memory (a kept axis is inside a reduced one)
    loads: dict  # op id -> flat element offset of the load
    stores: tuple  # (store, flat element offset)
    kept: Ix  # the flat offset of the kept index
    kept_size: int  # elements of the kept space (a memory accumulator's length)
    levels: tuple[Level, ...]
    split: Split | None
    depth: tuple[int, ...]  # per op: the level depth it is computed at (hoisted)
    reduce_level: int  # the first reduced level (len(levels) when none)
    partials: bool  # register mode with an innermost reduced level
    two_level: tuple[bool, ...]  # per reduction: a blocked float sum into a compensated float64 total
    nan_flagged: tuple[bool, ...]  # per reduction: float max/min with a NaN flag
    acc_scratch: tuple  # per reduction: (scratch offset, bytes) of its memory accumulator, or None
    partials_offset: int  # where the per-chunk partial results start in scratch
    scratch_bytes: int

    def last_chunk(self) -> int:
        """Iterations of the split level in the last chunk (every other chunk has `split.chunk`)."""
        return self.levels[self.split.level].extent - (self.split.chunks - 1) * self.split.chunk

    def linear_terms(self, space: tuple[int, ...], x: Ix) -> tuple[list, int]:
        """`x` (affine in the loop vars, other sub-expressions as atoms) as ([(term, coef)], const) in
        the renderer's order: ("level", d) for a level's value when x reads its collapsed axes with its
        strides, else ("axis", d, i) per axis i of level d, then ("atom", atom)."""
        coefs, atoms, k = affine(x)
        terms: list = []
        for d, lv in enumerate(self.levels):
            cs = [coefs.get(a, 0) for a in lv.axes]
            inner = [axis_stride(space, lv, i) for i in range(len(lv.axes))]
            if all(c == cs[-1] * p for c, p in zip(cs, inner)):
                terms.append((("level", d), cs[-1]))
            else:
                terms += [(("axis", d, i), c) for i, c in enumerate(cs) if c]
        terms += [(("atom", atom), c) for atom, c in atoms.items()]
        return terms, k


def axis_stride(space: tuple[int, ...], level: Level, i: int) -> int:
    """How many iterations of `level` one step of its i-th collapsed axis is."""
    return int(np.prod([space[b] for b in level.axes[i + 1:]], dtype=np.int64))


def round_up(n: int) -> int:
    """`n` bytes rounded up to the scratch alignment."""
    return -(-n // ALIGN) * ALIGN


def schedule_loop(loop: Loop, buffers: dict, policy: SplitPolicy | None = None) -> LoopSchedule:
    """The schedule of `loop` (`buffers`: name -> kernel Buffer); `policy` None never splits."""
    memory = not register_mode(loop)
    loads = {k: offset(o.param("index"), buffers[o.param("buffer")].shape)
             for k, o in enumerate(loop.ops) if o.prim == "load"}
    stores = tuple((s, offset(s.index, buffers[s.buffer].shape)) for s in loop.stores)
    kept = kept_offset(loop)
    exprs = list(loads.values()) + [off for _, off in stores] + [kept]
    exprs += [o.param("index") for o in loop.ops if o.prim == "index"]
    levels = tuple(_levels(loop, memory, exprs))
    split = None if policy is None else _split(loop, memory, levels, stores, policy)
    partials = not memory and bool(levels) and levels[-1].axes[0] in loop.reduce_axes
    reduce_level = next((d for d, lv in enumerate(levels) if lv.axes[0] in loop.reduce_axes), len(levels))
    acc_scratch, top = _acc_scratch(loop, buffers, memory)
    partial_bytes = round_up(split.chunks * len(loop.reductions) * PARTIAL_SLOT) if split and split.partial else 0
    return LoopSchedule(
        memory, loads, stores, kept, _kept_size(loop), levels, split, _depths(loop, loads, levels), reduce_level,
        partials, tuple(partials and r.combine == "add" and r.acc_dtype.kind == "f" for r in loop.reductions),
        tuple(nan_flagged(r) for r in loop.reductions), acc_scratch, top, top + partial_bytes)


def nan_flagged(r) -> bool:
    """Float max/min reductions keep a NaN flag beside a compare that ignores NaN (so it vectorizes)."""
    return r.combine in ("max", "min") and r.acc_dtype.kind == "f"


def register_mode(loop: Loop) -> bool:
    """Reductions accumulate in registers when no kept axis is inside a reduced one (after dropping
    axes of extent 1): then the innermost loop is a reduction over a contiguous axis."""
    axes = [a for a, n in enumerate(loop.space) if n > 1]
    return not loop.reductions or not axes or axes[-1] in loop.reduce_axes


def _kept_size(loop: Loop) -> int:
    return int(np.prod([n for a, n in enumerate(loop.space) if a not in loop.reduce_axes], dtype=np.int64))


def _acc_scratch(loop: Loop, buffers: dict, memory: bool) -> tuple[tuple, int]:
    """Per reduction, (offset, bytes) in scratch of its memory accumulator when it has one there (in
    memory mode, an accumulator dtype stored differently from its output's); and the bytes they take."""
    placed, top = [], 0
    for r in loop.reductions:
        if memory and not _same_storage(r.acc_dtype, buffers[r.out].dtype):
            n = _kept_size(loop) * r.acc_dtype.itemsize
            placed.append((top, n))
            top += round_up(n)
        else:
            placed.append(None)
    return tuple(placed), top


def _same_storage(a: np.dtype, b: np.dtype) -> bool:
    """Whether elements of dtypes `a` and `b` are stored alike (same width, both float or both not:
    int32 and uint32 share a buffer, as do bool and int8), so an accumulator may live in the other's."""
    return (a.kind == "f") == (b.kind == "f") and a.itemsize == b.itemsize


# --- index expressions as linear forms --------------------------------------------------------------

def affine(x: Ix) -> tuple[dict, dict, int]:
    """x = sum(coef * loop var) + sum(coef * atom) + const: ({axis: coef}, {atom: coef}, const)."""
    if x.op == "var":
        return {x.args[0]: 1}, {}, 0
    if x.op == "const" and not isinstance(x.args[0], bool):
        return {}, {}, x.args[0]
    if x.op == "add":
        coefs, atoms, k = {}, {}, 0
        for t in x.args:
            c, a, tk = affine(t)
            for key, v in c.items():
                coefs[key] = coefs.get(key, 0) + v
            for key, v in a.items():
                atoms[key] = atoms.get(key, 0) + v
            k += tk
        return coefs, atoms, k
    if x.op == "mul":
        c, a, k = affine(x.args[0])
        m = x.args[1]
        return {key: v * m for key, v in c.items()}, {key: v * m for key, v in a.items()}, k * m
    return {}, {x: 1}, 0


def vars_in(x: Ix) -> set[int]:
    """The loop axes `x` reads."""
    if x.op == "var":
        return {x.args[0]}
    return set().union(*(vars_in(a) for a in x.args if isinstance(a, Ix)))


def offset(index: tuple, shape: tuple) -> Ix:
    """The flat C-order element offset of `index` into an array of `shape`."""
    stride, terms = 1, []
    for i, n in reversed(list(zip(index, shape))):
        terms.append(ix.mul(i, stride))
        stride *= n
    return ix.add(*terms) if terms else ix.const(0)


def kept_offset(loop: Loop) -> Ix:
    """The flat offset of a point's kept index (where its reductions accumulate)."""
    kept = [(ix.var(a, n), n) for a, n in enumerate(loop.space) if a not in loop.reduce_axes]
    return offset(tuple(v for v, _ in kept), tuple(n for _, n in kept))


# --- the loop nest ----------------------------------------------------------------------------------

def _levels(loop: Loop, memory: bool, exprs) -> list[Level]:
    """Loop levels, outer to inner: adjacent axes that every index form reads alike collapse into one;
    in register mode the reduced axes go innermost, and a float sum's inner level runs in blocks."""
    nonlinear = set().union(*(vars_in(a) for e in exprs for a in affine(e)[1]))
    forms = [affine(e)[0] for e in exprs]
    axes = [a for a, n in enumerate(loop.space) if n > 1]
    if not memory:
        axes = [a for a in axes if a not in loop.reduce_axes] + [a for a in axes if a in loop.reduce_axes]
    levels: list[Level] = []
    for a in axes:
        n = loop.space[a]
        last = levels[-1] if levels else None
        if last is not None and a not in nonlinear and not nonlinear & set(last.axes) \
                and (a in loop.reduce_axes) == (last.axes[0] in loop.reduce_axes) \
                and all(f.get(last.axes[-1], 0) == f.get(a, 0) * n for f in forms):
            levels[-1] = Level(last.axes + (a,), last.extent * n)
        else:
            levels.append(Level((a,), n))
    partials = not memory and bool(levels) and levels[-1].axes[0] in loop.reduce_axes
    if partials and levels[-1].extent > BLOCK and any(
            r.combine == "add" and r.acc_dtype.kind == "f" for r in loop.reductions):
        levels[-1] = Level(levels[-1].axes, levels[-1].extent, BLOCK)
    return levels


def _depths(loop: Loop, loads: dict, levels) -> tuple[int, ...]:
    """Each op's depth: the deepest level among the loop axes its index or inputs read (hoisting)."""
    depth_of_axis = {a: d + 1 for d, lv in enumerate(levels) for a in lv.axes}
    depth: list[int] = []

    def ix_depth(x: Ix) -> int:
        if x.op == "var":
            return depth_of_axis.get(x.args[0], 0)
        if x.op == "value":
            return depth[x.args[0]]
        return max((ix_depth(a) for a in x.args if isinstance(a, Ix)), default=0)

    for k, o in enumerate(loop.ops):
        if o.prim == "load":
            depth.append(ix_depth(loads[k]))
        elif o.prim == "index":
            depth.append(ix_depth(o.param("index")))
        else:
            depth.append(max((depth[a] for a in o.args), default=0))
    return tuple(depth)


def _split(loop: Loop, memory: bool, levels, stores, policy: SplitPolicy) -> Split | None:
    """Chunks of one level when the loop's work is large, by its shape and ops alone (never the thread
    count, so results do not depend on it): the outermost level, or in memory mode (accumulators over
    the kept index) the outermost kept level, so chunks never share an accumulator (inside a reduced
    level, in chunks of at least `ROW_SEGMENT` elements of a row). Declined: no kept level in memory
    mode, and stores not at distinct elements per chunk (an index not linear in the loop variables, or
    not reading the chunked level's axes)."""
    if not levels:
        return None
    total = int(np.prod(loop.space, dtype=np.int64))
    work = total * max(1, sum(o.prim not in FREE_OPS for o in loop.ops))
    if work < policy.min_work:
        return None
    kept = [d for d, lv in enumerate(levels) if lv.axes[0] not in loop.reduce_axes]
    level = (kept or [None])[0] if memory else 0
    if level is None:
        return None
    outer = levels[level]
    for _, off in stores:
        coefs, atoms, _ = affine(off)
        if atoms or not any(coefs.get(a, 0) for a in outer.axes):
            return None
    per_iteration = work // outer.extent
    chunk = max(-(-outer.extent // policy.max_chunks), -(-policy.min_chunk_work // per_iteration), 1)
    if memory and any(lv.axes[0] in loop.reduce_axes for lv in levels[:level]):
        row = int(np.prod([lv.extent for lv in levels[level + 1:]], dtype=np.int64))
        chunk = max(chunk, -(-ROW_SEGMENT // row))
    if outer.block:
        chunk = -(-chunk // outer.block) * outer.block
    chunks = -(-outer.extent // chunk)
    reduced = outer.axes[0] in loop.reduce_axes
    return Split(chunk, chunks, reduced, level) if chunks > 1 else None


# --- which pointers are noalias ---------------------------------------------------------------------

def no_alias(kernel: Kernel, aliased: frozenset[tuple[str, str]] = frozenset()) -> set[str]:
    """Parameters a renderer may mark as aliasing nothing else: temps and scratch always; inputs and
    outputs unless the call passes one buffer for an (output, input) pair in `aliased` (its in-place
    writes: noalias there let LLVM move a store of the output before a load of the input, a
    miscompile the random programs found), or are an output and an input of one shape and dtype
    outside `kernel.shareable`."""
    free = {t.name for t in kernel.temps} | {"scratch"}
    risky = {name for pair in aliased for name in pair}
    for o in kernel.outputs:
        for i in kernel.inputs:
            if (i.shape, i.dtype) == (o.shape, o.dtype) and (o.name, i.name) not in kernel.shareable:
                risky |= {o.name, i.name}
    return free | {b.name for b in kernel.inputs + kernel.outputs if b.name not in risky}


# --- the GPU's thread mapping -----------------------------------------------------------------------

@dataclass(frozen=True)
class GridPolicy:
    """A GPU renderer's thread mapping constants: threads per block; reduced rows up to `serial_up_to`
    elements are walked by one thread, up to `warp_up_to` by a warp, longer ones by a block; a work
    item's chunk holds at least `min_chunk` elements, and chunks are added until about
    `target_threads` threads have work."""

    block: int = 256
    serial_up_to: int = 16
    warp_up_to: int = 2048
    min_chunk: int = 32
    target_threads: int = 1 << 19  # a large GPU holds about 2**18 threads at once (132 SMs x 2048)


@dataclass(frozen=True)
class GpuGrid:
    """How a Loop runs on a GPU. `kept`, `reduced`: the sizes of its kept and reduced spaces (flat,
    C order over their axes). Work item w = chunk * kept + kept index, run by `lanes` threads that
    stride over `chunk_size` elements of the reduced space; with `chunks` > 1 a second stage folds
    each kept index's chunk partials in chunk order."""

    kept: int
    reduced: int
    lanes: int
    chunks: int
    chunk_size: int

    @property
    def items(self) -> int:
        return self.kept * self.chunks


def gpu_grid(loop: Loop, policy: GridPolicy = GridPolicy()) -> GpuGrid:
    """The thread mapping of `loop` by its shape alone. Rows read contiguously (register mode) get a
    warp or a block per row; a kept axis innermost (memory mode) keeps one thread per kept index, so
    neighbouring threads read neighbouring elements, and splits the reduced space into chunks."""
    kept = _kept_size(loop)
    reduced = int(np.prod([loop.space[a] for a in loop.reduce_axes], dtype=np.int64))
    if not loop.reductions or reduced <= 1:
        return GpuGrid(kept, reduced, 1, 1, max(reduced, 1))
    if not register_mode(loop) or reduced <= policy.serial_up_to:
        lanes = 1
    else:
        lanes = 32 if reduced <= policy.warp_up_to else policy.block
    per_item = lanes * policy.min_chunk
    want = -(-policy.target_threads // (kept * lanes))
    chunks = max(1, min(-(-reduced // per_item), want)) if lanes == 1 or lanes == policy.block else 1
    chunk_size = -(-reduced // chunks)
    return GpuGrid(kept, reduced, lanes, -(-reduced // chunk_size), chunk_size)
