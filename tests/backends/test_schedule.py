"""The loop schedule (backends/schedule.py) on its own: levels and collapsing, accumulator modes,
hoisting depths, the thread split at its thresholds, scratch layout, and which buffers may be shared."""

from __future__ import annotations

import numpy as np

import ember.numpy as jnp
from ember.backends import kernel_index as ix
from ember.backends import schedule as S
from ember.backends.kernel import Contraction, Loop, lower_kernel
from ember.tracer import prims as P
from tests.backends.test_kernel import body

F32 = "float32"


def _sched(fn, *avals, kind="loop", policy=None, step=0):
    k = lower_kernel(body(fn, *avals), kind)
    buffers = {b.name: b for b in k.inputs + k.outputs + k.temps}
    return S.schedule_loop(k.steps[step], buffers, policy), k.steps[step]


def test_axes_read_alike_collapse_into_one_level():
    s, _ = _sched(lambda x, y: [x + y], ((4, 8, 16), F32), ((16,), F32))
    # axes 0 and 1 are read with matching strides by every index; y reads axis 2 alone, so it stays apart
    assert s.levels == (S.Level((0, 1), 32), S.Level((2,), 16))
    assert not s.memory and s.split is None and s.scratch_bytes == 0


def test_a_transpose_keeps_its_axes_apart():
    s, _ = _sched(lambda x: [P.transpose(x, (1, 0)) * 2.0], ((8, 16), F32))
    assert s.levels == (S.Level((0,), 16), S.Level((1,), 8))
    terms, k = s.linear_terms((16, 8), s.stores[0][1])  # the store's identity index reads both levels whole
    assert terms == [(("level", 0), 8), (("level", 1), 1)] and k == 0


def test_ops_are_hoisted_to_the_level_that_knows_their_inputs():
    s, loop = _sched(lambda x, y: [x + jnp.exp(y)[:, None]], ((4, 16), F32), ((4,), F32))
    assert s.levels == (S.Level((0,), 4), S.Level((1,), 16))
    depth = {o.prim: d for o, d in zip(loop.ops, s.depth)}
    assert depth["exp"] == 1 and depth["add"] == 2  # exp(y[i]) runs once per row


def test_a_reduced_innermost_axis_accumulates_in_registers_in_blocks():
    s, _ = _sched(lambda x: [P.reduce_sum(x, (1,))], ((64, 300), F32), kind="reduction")
    assert not s.memory and s.partials and s.reduce_level == 1
    assert s.levels == (S.Level((0,), 64), S.Level((1,), 300, S.BLOCK))
    assert s.two_level == (True,) and s.nan_flagged == (False,) and s.acc_scratch == (None,)
    m, _ = _sched(lambda x: [P.reduce_max(x, (1,))], ((64, 300), F32), kind="reduction")
    assert m.two_level == (False,) and m.nan_flagged == (True,) and m.levels[-1].block == 0


def test_a_kept_innermost_axis_accumulates_in_memory():
    s, _ = _sched(lambda x: [P.reduce_sum(x, (0,))], ((300, 64), F32), kind="reduction")
    assert s.memory and not s.partials and s.kept_size == 64
    assert s.levels == (S.Level((0,), 300), S.Level((1,), 64))  # row-major: the reduced axis stays outside
    assert s.acc_scratch == (None,) and s.scratch_bytes == 0  # float32 accumulates in the output itself
    h, _ = _sched(lambda x: [P.reduce_sum(x, (0,))], ((300, 64), "float16"), kind="reduction")
    assert h.acc_scratch == ((0, 64 * 4),) and h.scratch_bytes == 256  # float16 sums in float32 scratch


def test_split_at_the_policy_thresholds():
    policy = S.SplitPolicy(min_work=1000, min_chunk_work=100, max_chunks=4)
    below, _ = _sched(lambda x: [jnp.exp(x)], ((999,), F32), policy=policy)
    assert below.split is None
    at, _ = _sched(lambda x: [jnp.exp(x)], ((1000,), F32), policy=policy)
    assert at.split == S.Split(chunk=250, chunks=4, partial=False, level=0)
    small_chunks = S.SplitPolicy(min_work=1000, min_chunk_work=500, max_chunks=4)
    two, _ = _sched(lambda x: [jnp.exp(x)], ((1000,), F32), policy=small_chunks)
    assert two.split == S.Split(chunk=500, chunks=2, partial=False, level=0)
    unsplit, _ = _sched(lambda x: [jnp.exp(x)], ((1000,), F32))
    assert unsplit.split is None  # no policy: never split


def test_a_whole_array_sum_splits_into_blocks_with_partials_in_scratch():
    policy = S.SplitPolicy(min_work=1000, min_chunk_work=100, max_chunks=4)
    s, _ = _sched(lambda x: [P.reduce_sum(x, (0,))], ((4000,), F32), kind="reduction", policy=policy)
    assert s.split == S.Split(chunk=1024, chunks=4, partial=True, level=0)  # chunks are whole blocks
    assert s.partials_offset == 0 and s.scratch_bytes == S.round_up(4 * S.PARTIAL_SLOT)
    assert s.last_chunk() == 4000 - 3 * 1024


def test_memory_mode_splits_the_outermost_kept_level():
    policy = S.SplitPolicy(min_work=1000, min_chunk_work=100, max_chunks=4)
    s, _ = _sched(lambda x: [P.reduce_sum(x, (0,))], ((30, 640), "float16"), kind="reduction", policy=policy)
    assert s.memory and s.split.level == 1 and not s.split.partial
    assert s.partials_offset == s.scratch_bytes == S.round_up(640 * 4)  # no partials: the chunks own columns
    # each chunk walks every row for its columns: at least ROW_SEGMENT contiguous elements of a row
    assert s.split == S.Split(chunk=S.ROW_SEGMENT, chunks=3, partial=False, level=1)
    narrow, _ = _sched(lambda x: [P.reduce_sum(x, (0,))], ((3000, 64), F32), kind="reduction", policy=policy)
    assert narrow.memory and narrow.split is None  # 64 columns are one chunk: walked row after row
    outer, _ = _sched(lambda x: [P.reduce_sum(x, (1,))], ((8, 300, 4), F32), kind="reduction", policy=policy)
    assert outer.split == S.Split(chunk=2, chunks=4, partial=False, level=0)  # a kept level outside the rows


def test_axes_of_extent_one_are_no_levels():
    policy = S.SplitPolicy(min_work=10, min_chunk_work=1, max_chunks=4)
    s, _ = _sched(lambda x: [P.reduce_sum(x, (1,))], ((1, 4000), F32), kind="reduction", policy=policy)
    assert s.levels == (S.Level((1,), 4000, S.BLOCK),) and s.reduce_level == 0
    assert s.split.partial  # the kept axis has extent 1: the reduced level is the outermost, split


def test_index_forms():
    assert S.affine(ix.add(ix.mul(ix.var(0, 4), 3), ix.const(2))) == ({0: 3}, {}, 2)
    assert S.offset((ix.var(0, 4), ix.var(1, 5)), (4, 5)) == ix.add(ix.var(1, 5), ix.mul(ix.var(0, 4), 5))


def test_in_place_safe_only_where_the_output_is_written_at_the_inputs_read():
    k = lower_kernel(body(lambda x, y: [jnp.exp(x) * y + x], ((1000,), F32), ((1000,), F32)), "loop")
    assert ("out0", "in0") in k.shareable and ("out0", "in1") in k.shareable
    rev = lower_kernel(body(lambda x: [P.rev(x, (0,)) + x], ((64,), F32)), "loop")
    assert ("out0", "in0") not in rev.shareable and "out0" not in S.no_alias(rev)
    # the output written by the reduction's loop, which a later loop reads the input after: not safe
    earlier = lower_kernel(body(lambda x: [x * 2.0, x - P.reduce_max(x, (0,))], ((64,), F32)), "multi_output")
    assert len(earlier.steps) == 2 and ("out0", "in0") not in earlier.shareable
    assert ("out1", "in0") in earlier.shareable


def test_pairs_the_call_shares_are_never_noalias():
    """c1b046d: a kernel writing an output in place of an operand it reads at the same index had both
    pointers noalias (the pair is shareable), so LLVM loaded the operand after storing the output."""
    k = lower_kernel(body(lambda x: [jnp.where(x > 0.0, x * x, x)], ((2, 4), F32)), "loop")
    assert ("out0", "in0") in k.shareable
    assert {"in0", "out0", "scratch"} <= S.no_alias(k)  # separate buffers: noalias is right
    assert S.no_alias(k, frozenset({("out0", "in0")})) == {"scratch"}


def test_dtypes_stored_alike_share_an_accumulator():
    s, _ = _sched(lambda x: [P.reduce_max(x, (0,))], ((300, 64), "int32"), kind="reduction")
    assert s.memory and s.acc_scratch == (None,)
    assert S._same_storage(np.dtype("int32"), np.dtype("uint32"))
    assert not S._same_storage(np.dtype("int32"), np.dtype("float32"))


def test_the_disk_cache_key_covers_the_schedule():
    """A changed schedule changes the generated code: the LLVM code signature lists this module's file."""
    from ember.backends.llvm import entry
    assert any(path.replace("\\", "/").endswith("backends/schedule.py") for path, *_ in entry._generator_files())


BODIES = [  # (fn, avals...): one loop, several loops, several outputs, reads through layout ops
    (lambda x, y: [jnp.exp(x) * y + x], ((8, 4), F32), ((8, 4), F32)),
    (lambda x: [jnp.where(x > 0.0, x * x, x)], ((2, 4), F32)),  # c1b046d's pair
    (lambda x: [x * 2.0, P.reduce_sum(x, (0,))], ((64,), F32)),
    (lambda x: [x * 2.0, x - P.reduce_max(x, (0,))], ((64,), F32)),
    (lambda x: [x - P.reduce_max(x, (1,))[:, None]], ((8, 16), F32)),
    (lambda x: [P.rev(x, (0,)) + x], ((64,), F32)),
    (lambda x: [P.transpose(x, (1, 0)) + x], ((8, 8), F32)),
    (lambda x, y: [x + y], ((8, 8), F32), ((8,), F32)),
    (lambda x, y: [x + P.broadcast_in_dim(y, (8, 8), (1,))], ((8, 8), F32), ((8,), F32)),
    (lambda x: [x * P.broadcast_in_dim(P.slice(x, (0, 0), (1, 8), (1, 1)).reshape((8,)), (8, 8), (1,))],
     ((8, 8), F32)),
    (lambda x, y: [jnp.tanh(x) * y, P.reduce_sum(y, (1,))], ((8, 8), F32), ((8, 8), F32)),
    (lambda x, y: [x * 2.0, x + P.reduce_sum(y, (0,))], ((8,), F32), ((16, 8), F32)),  # written, then read
    (lambda x, y: [x * P.reduce_sum(y, (0,)), P.reduce_sum(x, (0,))], ((8,), F32), ((16, 8), F32)),
    (lambda x: [x * 2.0, P.reduce_sum(x, (0,)), P.reduce_sum(x, (1,))], ((8, 8), F32)),  # two reduced loops
    (lambda x: [P.reduce_sum(x, (1,)), x * 3.0, P.reduce_max(x, (0,))], ((8, 8), F32)),
    (lambda x: [x + 1.0, P.argmax(x, 0, np.dtype(np.int32))], ((8, 8), F32)),  # a whole step
    (lambda x, y: [x * y, y * 2.0 - P.reduce_max(x, (0,))], ((8,), F32), ((8,), F32)),
    (lambda x: [x * P.reduce_sum(P.rev(x, (0,)), (0,))], ((64,), F32)),  # reversed, but in an earlier loop
    (lambda m, x: [P.reduce_sum((x - m) * (x - m), (0,)) / 8.0], ((), F32), ((8,), F32)),  # a var: m broadcast
    (lambda a, b, h: [(a @ b) * h], ((8, 4), F32), ((4, 8), F32), ((8, 8), F32)),  # the dot writes the result
    # the dot's result read by two loops: a temp, and the epilogue reads h where it writes the result
    (lambda a, b, h: [(a @ b) * h, P.reduce_sum(a @ b, (0,))], ((8, 4), F32), ((4, 8), F32), ((8, 8), F32)),
    (lambda a, b, c, d: [jnp.tanh(a @ b + c), d * (1.0 - jnp.tanh(a @ b + c) ** 2)],  # a backward epilogue
     ((32,), F32), ((32, 32), F32), ((32,), F32), ((32,), F32)),
    # reshapes and unit axes keep the flat offset: read where written (logsumexp's `max` through (1, n))
    (lambda x: [x * P.reshape(P.reshape(x, (6, 4)), (4, 6))], ((4, 6), F32)),
    (lambda x: [x + P.reshape(P.broadcast_in_dim(x, (1, 500), (1,)), (500,))], ((500,), F32)),
    (lambda x: [x + P.reshape(P.transpose(P.reshape(x, (1, 500)), (1, 0)), (500,))], ((500,), F32)),
    (lambda x: [x + P.transpose(P.transpose(x, (1, 0, 2)), (1, 0, 2))], ((1, 5, 3), F32)),
    (lambda x, y: [x * P.reshape(P.reduce_sum(y, (0,)), (1, 6))], ((1, 6), F32), ((3, 6), F32)),
    (lambda x: [P.slice(x, (0, 0), (1, 4), (2, 1)) * x], ((1, 4), F32)),  # a strided slice of a unit axis
    (lambda x: [P.rev(x, (0,)) * x], ((1, 4), F32)),  # a reversed unit axis
]


def test_a_transpose_undone_by_another_is_declined():
    """The body's fact takes each transpose of longer axes as a read elsewhere, though two may cancel
    (simplify folds such pairs before fusion); the kernel's index arithmetic composes them."""
    k = lower_kernel(body(lambda x: [x + P.transpose(P.transpose(x, (1, 0, 2)), (1, 0, 2))], ((2, 5, 3), F32)), "loop")
    assert not k.shareable and kernel_truth(k) == {("out0", "in0")}


def at_identity(index, space) -> bool:
    """Whether a load or store `index` is each loop point itself (evaluated over the whole space: an
    index the simplifier leaves as arithmetic counts too; a data-dependent one never does)."""
    def data_dependent(x):
        return x.op == "value" or any(data_dependent(a) for a in x.args if isinstance(a, ix.Ix))

    if len(index) != len(space) or any(data_dependent(i) for i in index):
        return False
    points = np.indices(space, sparse=True) if space else ()
    return all(np.array_equal(np.broadcast_to(ix.evaluate(i, points, []), space), np.broadcast_to(points[a], space))
               for a, i in enumerate(index))


def kernel_truth(k) -> set[tuple[str, str]]:
    """The pairs of one shape and dtype that `k`'s steps may run on one buffer, read off the steps
    themselves (the oracle for `Kernel.shareable`, which comes from the body graph): every write of
    the output is a store at each loop point in a loop reading the input only there, and no later
    step reads the input; a contraction writing the output, or any other whole step, shares nothing."""
    def safe(out, inp):
        written = False
        for step in k.steps:
            if not isinstance(step, Loop):
                if not isinstance(step, Contraction) or step.out == out or (written and inp in (step.lhs, step.rhs)):
                    return False
                continue
            writes = any(s.buffer == out for s in step.stores)
            if any(r.out == out for r in step.reductions) or any(
                    s.buffer == out and not at_identity(s.index, step.space) for s in step.stores):
                return False
            for o in step.ops:
                if o.prim == "load" and o.param("buffer") == inp:
                    if (writes or written) and not at_identity(o.param("index"), step.space) or written and not writes:
                        return False
            written |= writes
        return True

    return {(o.name, i.name) for o in k.outputs for i in k.inputs
            if (i.shape, i.dtype) == (o.shape, o.dtype) and safe(o.name, i.name)}


def _plan_pairs(g):
    """The (output, input) pairs the memory plan lets a fusion of body `g` write in place: shareable,
    and the input not reduced into a value the body reads again (`_body_hazards`)."""
    from ember.passes.memory import _body_hazards, body_shareable
    hazards = _body_hazards(g)
    return {(f"out{m}", f"in{k}") for m, k in body_shareable(g) if k not in hazards}


def test_one_derivation_of_which_buffers_a_kernel_may_share():
    """`passes.memory.body_shareable` is the one derivation: `lower_kernel` hands it to renderers as
    `Kernel.shareable` (noalias, hosting, and a raise on a plan asking for another pair), and the
    memory plan asks only for pairs in it. Checked against the kernel's steps: never bolder, and equal
    on these bodies; the plan asks for all of them but where the body reduces the input into a value it
    reads again (`x - max(x)`, three bodies, four pairs), reads it through a layout op (in an earlier
    loop, or one keeping the flat offset: eight bodies) or holds a dot (two bodies, four pairs): the
    plan's own caution, which names the node (`memory._body_hazards`)."""
    fewer = 0
    for fn, *avals in BODIES:
        g = body(fn, *avals)
        k = lower_kernel(g, "loop")
        assert k.shareable == kernel_truth(k), (avals, k.shareable ^ kernel_truth(k))
        asked = _plan_pairs(g)
        assert asked <= k.shareable
        fewer += len(k.shareable - asked)
    assert fewer == 16


def test_an_output_stored_before_a_later_loops_read_shares_nothing_with_that_input():
    from ember.passes.memory import body_shareable
    g = body(lambda x, y: [x * 2.0, x + P.reduce_sum(y, (0,))], ((8,), F32), ((16, 8), F32))
    assert body_shareable(g) == {(1, 0)}  # x * 2 is stored in the first loop, x + sum(y) in the last


def test_the_renderer_raises_on_a_plan_asking_for_an_unsafe_pair():
    from types import SimpleNamespace

    import pytest

    from ember.backends.kernel import check_inplace, node_kernel
    from ember.tracer.ir import Node, Var
    g = body(lambda x: [P.rev(x, (0,)) + x], ((64,), F32))
    x, out = Var(g.inputs[0].aval), Var(g.outputs[0].aval)
    node = Node(P.fusion_p, [x], {"body": g, "kind": "loop"}, [out])
    kernel, bound = node_kernel(node)
    check_inplace(node, kernel, bound, SimpleNamespace(inplace={}))
    with pytest.raises(ValueError, match="in place of operand 0"):
        check_inplace(node, kernel, bound, SimpleNamespace(inplace={out: x}))


def test_every_kernel_of_some_programs_shares_what_its_steps_allow():
    """The fact on every node of optimized programs (gradients, softmax, a variance, layer norm)."""
    import ember
    import ember.nn as nn
    from ember.backends.kernel import node_kernel
    rng = np.random.default_rng(0)
    x = rng.standard_normal((16, 8)).astype(np.float32)
    params = nn.init_mlp([8, 16, 4])

    def norm(x):
        m = jnp.mean(x, axis=-1, keepdims=True)
        return (x - m) / jnp.sqrt(jnp.var(x, axis=-1, keepdims=True) + 1e-5)

    programs = [
        (lambda p, x: ember.grad(lambda p, x: jnp.sum(nn.mlp(p, x, jnp.tanh)))(p, x), params, x),
        (lambda x: ember.grad(lambda x: jnp.sum(nn.softmax(x, axis=-1) * x))(x), x),
        (lambda x: (jnp.mean(x), jnp.var(x), jnp.argmax(x, axis=0)), x),
        (lambda x: ember.grad(lambda x: jnp.sum(norm(x) ** 2))(x), x),
    ]
    kernels = 0
    for f, *args in programs:
        for node in ember.jit(f).lower(*args).optimized.nodes:
            k, _ = node_kernel(node)
            assert k.shareable == kernel_truth(k), (node, k)
            kernels += 1
    assert kernels > 20
