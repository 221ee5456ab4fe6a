"""The VJP and batching rules of cond, while and scan: each transforms the bodies with the transform
itself (a body is a graph), so they live beside the transforms rather than with the primitives.

- scan VJP: the forward scan runs the body's forward part and stacks the residuals its backward part
  needs (a residual that is a loop-invariant operand is passed once, a slice of an xs operand is read
  from it: neither is stacked again); the pullback is a
  reverse scan of the body's backward part, carrying the carry's cotangent and the sum of the
  loop-invariant operands' cotangents. Which carries are active is a fixed point over the body.
- cond VJP: each branch's forward also returns the residuals of every branch (zeros for the others',
  as JAX joins them); the pullback is a cond over the branches' backward parts.
- while VJP: none, as in JAX (the trip count is not known to a reverse pass): a clear error.
- forward mode: loops carry their tangents beside their values (a while too), branches compute theirs.
- batching: a carry is batched when its initial value or what the body makes of it is (a fixed point);
  a cond whose index is batched becomes a select of every branch's batched result; a while whose
  predicate is batched runs until every lane is done, finished lanes frozen by a select.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from ember.errors import ArgumentValueError
from ember.passes.autodiff import activity, differentiable_outputs, split_forward_backward, vjp_graph
from ember.passes.dce import dce
from ember.passes.forward import jvp_eval
from ember.passes.vmap import vmap_graph
from ember.tracer import dtypes
from ember.tracer import prims as P
from ember.tracer.aval import ShapedArray
from ember.tracer.ir import Graph, Var
from ember.tracer.primitive import def_batch, def_jvp, def_vjp, vjp_fwd_rules
from ember.tracer.prims.util import batch_size, move_bdim, shape_of
from ember.tracer.trace import eval_graph, new_builder


def trace_closed(fn: Callable, in_avals: Sequence[ShapedArray]) -> tuple[Graph, list]:
    """`fn(*tracers) -> list` traced into a closed graph; returns it and the values of its leading
    (closed-over) inputs."""
    with new_builder() as b:
        args = [b.new_input(a) for a in in_avals]
        graph = b.build(list(fn(*args)))
    return P.close_graph(graph)


def _zeros(aval: ShapedArray):
    return P.full(aval.shape, 0, aval.dtype)


def depends(graph: Graph, marked: Sequence[bool]) -> list[bool]:
    """For each output of `graph`: does it depend on an input marked True?"""
    hit = varying_vars(graph, marked)
    return [isinstance(v, Var) and v in hit for v in graph.outputs]


def varying_vars(graph: Graph, marked: Sequence[bool]) -> set[Var]:
    """The Vars of `graph` that depend on an input marked True."""
    hit = {v for v, m in zip(graph.inputs, marked) if m}
    for node in graph.nodes:
        if any(isinstance(a, Var) and a in hit for a in node.inputs):
            hit.update(node.outputs)
    return hit


def _invariant_values(fwd: Graph, num_consts: int, wanted: list[Var], consts: list) -> list:
    """The values of `wanted` (Vars of `fwd` computed from its first `num_consts` inputs alone), emitted
    in the current trace on the loop's invariant operands `consts`: once, not once per step."""
    if not wanted:
        return []
    return eval_graph(dce(Graph(fwd.inputs[:num_consts], fwd.nodes, wanted, fwd.consts, fwd.const_values)), consts)


def carry_fixed_point(body: Graph, before: Sequence[bool], carry: Sequence[bool], after: Sequence[bool],
                      test: Callable[[Graph, list[bool]], list[bool]]) -> list[bool]:
    """Which carries are marked once the body has run any number of times: marked initially, or made
    from a marked value by the body (`test` says which outputs are marked, given the inputs)."""
    carry = list(carry)
    while True:
        outs = test(body, list(before) + carry + list(after))[:len(carry)]
        new = [c or o for c, o in zip(carry, outs)]
        if new == carry:
            return carry
        carry = new


def _active_outputs(graph: Graph, active: list[bool]) -> list[bool]:
    act = activity(graph, active)
    return [isinstance(v, Var) and v in act for v in graph.outputs]


# --- scan -----------------------------------------------------------------------------------------

class _ScanResiduals:
    """What a differentiated scan keeps for its pullback: the body's backward graph, its residuals
    (stacked per step, or a loop-invariant operand's value) and the activity it was split for."""

    def __init__(self, bwd: Graph, layout: list, values: list, carry_act: list[bool], body_active: list[bool]):
        self.bwd, self.layout, self.values = bwd, layout, values
        self.carry_act, self.body_active = carry_act, body_active


def _scan_fwd(*ins, active, body, length, reverse, num_consts, num_carry, unroll):
    a_c, a_carry, a_x = P.split_scan(list(active), num_consts, num_carry)
    carry_act = carry_fixed_point(body, a_c, a_carry, a_x, _active_outputs)
    body_active = a_c + carry_act + a_x
    n_in, n_out = len(body.inputs), len(body.outputs)
    fwd, bwd, _ = split_forward_backward(vjp_graph(body, body_active), n_in, n_out)
    fwd_full = fwd
    residuals = list(fwd.outputs[n_out:])
    const_pos = {v: i for i, v in enumerate(fwd.inputs[:num_consts])}
    xs_pos = {v: i for i, v in enumerate(fwd.inputs[num_consts + num_carry:n_in])}
    varying = varying_vars(fwd, [i >= num_consts for i in range(n_in)])
    # a residual that is a loop-invariant operand, or a slice of an xs operand, is read from that
    # operand; one computed from the invariant operands alone is computed once, before the loop; the
    # others are stacked by the forward scan
    layout = [("const", const_pos[r]) if r in const_pos else ("xs", xs_pos[r]) if r in xs_pos
              else ("stacked", None) if r in varying else ("invariant", None) for r in residuals]
    stacked = [r for r, (kind, _) in zip(residuals, layout) if kind == "stacked"]
    fwd, extra = P.close_graph(fwd.replace(outputs=list(fwd.outputs[:n_out]) + stacked))
    consts, carry, xs = P.split_scan(list(ins), num_consts, num_carry)
    invariant = iter(_invariant_values(fwd_full, num_consts, [r for r, (kind, _) in zip(residuals, layout)
                                                               if kind == "invariant"], consts))
    outs = P.scan_p.bind(*extra, *consts, *carry, *xs, body=fwd, length=length, reverse=reverse,
                         num_consts=len(extra) + num_consts, num_carry=num_carry, unroll=unroll)
    values, k = [], n_out
    for kind, i in layout:
        if kind == "const":
            values.append(consts[i])
        elif kind == "xs":
            values.append(xs[i])
        elif kind == "invariant":
            values.append(next(invariant))
        else:
            values.append(outs[k])
            k += 1
    return list(outs[:n_out]), _ScanResiduals(bwd, layout, values, carry_act, body_active)


vjp_fwd_rules[P.scan_p] = _scan_fwd


def _outer_products(bwd: Graph, n_consts: int) -> tuple[Graph, list[int]]:
    """The backward body with each loop-invariant operand's per-step cotangent that is an outer product
    x_t (x) y_t (a dot_general contracting nothing: a weight's, in an RNN) replaced by x_t and y_t as
    extra last outputs, and the positions (among the first `n_consts` outputs) so replaced. The scan
    stacks the factors and one contraction over the steps sums them afterwards (a GEMM), instead of
    adding a whole weight-sized product into an accumulator at every step."""
    producer = {v: n for n in bwd.nodes for v in n.outputs}
    outer, factors = [], []
    for j, v in enumerate(bwd.outputs[:n_consts]):
        n = producer.get(v) if isinstance(v, Var) else None
        if (n is not None and n.prim is P.dot_general_p and n.params["dimension_numbers"] == (((), ()), ((), ()))
                and all(isinstance(a, Var) for a in n.inputs) and sum(a.aval.size for a in n.inputs) < v.aval.size):
            outer.append(j)
            factors += list(n.inputs)
    if not outer:
        return bwd, []
    kept = [v for j, v in enumerate(bwd.outputs) if j not in outer]
    return dce(bwd.replace(outputs=kept + factors)), outer


@def_vjp(P.scan_p)
def _scan_vjp(cts, *ins, out, active, saved: _ScanResiduals, body, length, reverse, num_consts, num_carry, unroll):
    consts, carry, xs = P.split_scan(list(ins), num_consts, num_carry)
    a_c, _, a_x = P.split_scan(list(saved.body_active), num_consts, num_carry)
    carry_act = saved.carry_act
    out_avals = body.out_avals
    float_outs = differentiable_outputs(body)
    ct_carry = [cts[k] if cts[k] is not None else _zeros(out_avals[k]) for k in range(num_carry) if carry_act[k]]
    ct_ys = {k: cts[k] for k in range(num_carry, len(out_avals)) if k in float_outs and cts[k] is not None}
    once = ("const", "invariant")  # residuals read whole by every step; the others one slice per step
    invariant = [v for v, (kind, _) in zip(saved.values, saved.layout) if kind in once]
    stacked = [v for v, (kind, _) in zip(saved.values, saved.layout) if kind not in once]
    ys_keys = sorted(ct_ys)
    n_active = sum(a_c)
    bwd, outer = _outer_products(saved.bwd, n_active)
    active_consts = [v for v, a in zip(body.inputs[:num_consts], a_c) if a]
    # the active consts whose cotangent the scan carries (an outer product's factors are stacked instead)
    acc0 = [_zeros(v.aval) for j, v in enumerate(active_consts) if j not in outer]
    n_acc = len(acc0)

    def step(*args):
        inv = list(args[:len(invariant)])
        rest = args[len(invariant):]
        ct_c, acc = list(rest[:len(ct_carry)]), list(rest[len(ct_carry):len(ct_carry) + n_acc])
        rest = rest[len(ct_carry) + n_acc:]
        res_t, ct_y_t = list(rest[:len(stacked)]), dict(zip(ys_keys, rest[len(stacked):]))
        res = [inv.pop(0) if kind in once else res_t.pop(0) for kind, _ in saved.layout]
        carry_cts = iter(ct_c)
        body_cts = []
        for k in float_outs:
            if k < num_carry:
                body_cts.append(next(carry_cts) if carry_act[k] else _zeros(out_avals[k]))
            else:
                body_cts.append(ct_y_t.get(k, None))
                if body_cts[-1] is None:
                    body_cts[-1] = _zeros(out_avals[k])
        got = eval_graph(bwd, res + body_cts)
        grads, factors = iter(got[:len(got) - 2 * len(outer)]), got[len(got) - 2 * len(outer):]
        active_c = iter(range(n_active))
        g = [(None if next(active_c) in outer else next(grads)) if a and i < num_consts else next(grads) if a
             else None for i, a in enumerate(saved.body_active)]
        g_c, g_carry, g_x = P.split_scan(g, num_consts, num_carry)
        new_acc = [P.add(s, d) for s, d in zip(acc, (x for x in g_c if x is not None))]
        return [x for x in g_carry if x is not None] + new_acc + [x for x in g_x if x is not None] + factors

    def sl(v):
        a = _aval_of(v)
        return a.update(shape=a.shape[1:])

    in_avals = ([_aval_of(v) for v in invariant] + [_aval_of(c) for c in ct_carry] + [_aval_of(a) for a in acc0]
                + [sl(v) for v in stacked] + [sl(ct_ys[k]) for k in ys_keys])
    graph, extra = trace_closed(step, in_avals)
    n_consts = len(extra) + len(invariant)
    outs = P.scan_p.bind(*extra, *invariant, *ct_carry, *acc0, *stacked, *(ct_ys[k] for k in ys_keys), body=graph,
                         length=length, reverse=not reverse, num_consts=n_consts,
                         num_carry=len(ct_carry) + n_acc, unroll=unroll)
    n_xs = sum(a_x)
    ys = outs[len(ct_carry) + n_acc:]
    g_carry, g_acc, g_xs = (iter(outs[:len(ct_carry)]), iter(outs[len(ct_carry):len(ct_carry) + n_acc]),
                            iter(ys[:n_xs]))
    stacked_factors = ys[n_xs:]
    summed_outer = {j: P.dot_general(stacked_factors[2 * k], stacked_factors[2 * k + 1], (((0,), (0,)), ((), ())))
                    for k, j in enumerate(outer)}
    active_c = iter(range(n_active))
    result = [None if not a else summed_outer[j] if (j := next(active_c)) in outer else next(g_acc) for a in a_c]
    result += [next(g_carry) if a else None for a in carry_act]
    result += [next(g_xs) if a else None for a in a_x]
    return tuple(r if act else None for r, act in zip(result, active))


@def_batch(P.scan_p)
def _scan_batch(args, dims, *, body, length, reverse, num_consts, num_carry, unroll):
    size = batch_size(args, dims)
    consts, carry, xs = P.split_scan(list(args), num_consts, num_carry)
    d_c, d_carry, d_x = P.split_scan(list(dims), num_consts, num_carry)
    b_c, b_x = [d is not None for d in d_c], [d is not None for d in d_x]
    b_carry = carry_fixed_point(body, b_c, [d is not None for d in d_carry], b_x, depends)
    consts = [move_bdim(c, d, 0, size) if b else c for c, d, b in zip(consts, d_c, b_c)]
    carry = [move_bdim(c, d, 0, size) if b else c for c, d, b in zip(carry, d_carry, b_carry)]
    xs = [move_bdim(x, d, 1, size) if b else x for x, d, b in zip(xs, d_x, b_x)]
    in_b = b_c + b_carry + b_x
    out_b = depends(body, in_b)
    out_b[:num_carry] = b_carry
    batched = vmap_graph(body, [0 if b else None for b in in_b], size, [0 if b else None for b in out_b])
    batched, extra = P.close_graph(batched)
    outs = P.scan_p.bind(*extra, *consts, *carry, *xs, body=batched, length=length, reverse=reverse,
                         num_consts=len(extra) + num_consts, num_carry=num_carry, unroll=unroll)
    out_dims = [(0 if k < num_carry else 1) if b else None for k, b in enumerate(out_b)]
    return list(outs), out_dims


# --- cond -----------------------------------------------------------------------------------------

class _CondResiduals:
    def __init__(self, bwds: list[Graph], res_avals: list[ShapedArray], values: list, op_active: list[bool]):
        self.bwds, self.res_avals, self.values, self.op_active = bwds, res_avals, values, op_active


def _cond_fwd(index, *ops, active, branches):
    op_active = list(active[1:])
    n_in, n_out = len(ops), len(branches[0].outputs)
    splits = [split_forward_backward(vjp_graph(g, op_active), n_in, n_out) for g in branches]
    res_avals = [v.aval for fwd, _, _ in splits for v in fwd.outputs[n_out:]]
    fwds, start = [], 0
    for fwd, _, n_res in splits:
        def branch(*a, fwd=fwd, start=start, n_res=n_res):
            outs = eval_graph(fwd, list(a))
            mine = outs[n_out:]
            joined = [mine[i - start] if start <= i < start + n_res else _zeros(r) for i, r in enumerate(res_avals)]
            return list(outs[:n_out]) + joined
        fwds.append(trace_closed(branch, [_aval_of(o) for o in ops]))
        start += n_res
    extra = [x for _, e in fwds for x in e]
    graphs = _share_leading(fwds)
    outs = P.cond_p.bind(index, *extra, *ops, branches=tuple(graphs))
    saved = _CondResiduals([bwd for _, bwd, _ in splits], res_avals, list(outs[n_out:]), op_active)
    return list(outs[:n_out]), saved


def _aval_of(x) -> ShapedArray:
    if hasattr(x, "aval"):
        return x.aval
    a = np.asarray(x)
    return ShapedArray(a.shape, dtypes.canonicalize(a.dtype))


def _share_leading(traced: list[tuple[Graph, list]]) -> list[Graph]:
    """Closed graphs, each with its own leading closed-over inputs, made to all take all of them."""
    return P.share_leading([g for g, _ in traced], [len(e) for _, e in traced])


vjp_fwd_rules[P.cond_p] = _cond_fwd


@def_vjp(P.cond_p)
def _cond_vjp(cts, index, *ops, out, active, saved: _CondResiduals, branches):
    out_avals = branches[0].out_avals
    float_outs = differentiable_outputs(branches[0])
    cts = [cts[k] if cts[k] is not None else _zeros(out_avals[k]) for k in float_outs]
    res_offsets, start = [], 0
    for bwd in saved.bwds:
        n = len(bwd.inputs) - len(float_outs)
        res_offsets.append((start, n))
        start += n
    traced = []
    for bwd, (s, n) in zip(saved.bwds, res_offsets):
        def branch(*a, bwd=bwd, s=s, n=n):
            res, c = list(a[:len(saved.res_avals)]), list(a[len(saved.res_avals):])
            return eval_graph(bwd, res[s:s + n] + c)
        traced.append(trace_closed(branch, list(saved.res_avals) + [_aval_of(c) for c in cts]))
    extra = [x for _, e in traced for x in e]
    grads = iter(P.cond_p.bind(index, *extra, *saved.values, *cts, branches=tuple(_share_leading(traced))))
    return (None,) + tuple(next(grads) if a else None for a in saved.op_active)


@def_batch(P.cond_p)
def _cond_batch(args, dims, *, branches):
    size = batch_size(args, dims)
    index, ops = args[0], list(args[1:])
    d_index, d_ops = dims[0], list(dims[1:])
    b_ops = [d is not None for d in d_ops]
    ops = [move_bdim(o, d, 0, size) if b else o for o, d, b in zip(ops, d_ops, b_ops)]
    in_dims = [0 if b else None for b in b_ops]
    if d_index is None:
        out_b = [any(bs) for bs in zip(*(depends(g, b_ops) for g in branches))]
        traced = [P.close_graph(vmap_graph(g, in_dims, size, [0 if b else None for b in out_b])) for g in branches]
        extra = [x for _, e in traced for x in e]
        outs = P.cond_p.bind(index, *extra, *ops, branches=tuple(_share_leading(traced)))
        return list(outs), [0 if b else None for b in out_b]
    # a per-lane index: every branch runs on the whole batch and each lane selects its branch's result
    index = move_bdim(index, d_index, 0, size)
    results = [eval_graph(vmap_graph(g, in_dims, size, 0), ops) for g in branches]
    outs = []
    for k, aval in enumerate(branches[0].out_avals):
        shape = (size,) + aval.shape
        which = P.broadcast_in_dim(index, shape, (0,))
        out = results[-1][k]
        for j in range(len(branches) - 2, -1, -1):
            out = P.select(P.eq(which, np.int32(j)), results[j][k], out)
        outs.append(out)
    return outs, [0] * len(outs)


# --- while ----------------------------------------------------------------------------------------

@def_vjp(P.while_p)
def _while_vjp(cts, *ins, out, active, cond_graph, body_graph, cond_nconsts, body_nconsts):
    raise ArgumentValueError(
        "Reverse-mode differentiation does not work for lax.while_loop or lax.fori_loop with dynamic start/stop "
        "values. Try using lax.scan, or using fori_loop with static start/stop (Python ints), which is a scan")


@def_batch(P.while_p)
def _while_batch(args, dims, *, cond_graph, body_graph, cond_nconsts, body_nconsts):
    size = batch_size(args, dims)
    nc, nb = cond_nconsts, body_nconsts
    b = [d is not None for d in dims]
    b_cc, b_bc, b_carry = b[:nc], b[nc:nc + nb], b[nc + nb:]
    b_carry = carry_fixed_point(body_graph, b_bc, b_carry, [], depends)
    pred_batched = depends(cond_graph, b_cc + b_carry)[0]
    if pred_batched:  # lanes finish at different trips: every carry varies per lane
        b_carry = [True] * len(b_carry)
    moved = [move_bdim(a, d, 0, size) if m else a for a, d, m in zip(args, dims, b_cc + b_bc + b_carry)]
    cc, bc, carry = moved[:nc], moved[nc:nc + nb], moved[nc + nb:]
    cond_in = [0 if m else None for m in b_cc + b_carry]
    body_in = [0 if m else None for m in b_bc + b_carry]
    carry_dims = [0 if m else None for m in b_carry]
    v_cond = vmap_graph(cond_graph, cond_in, size, [0 if pred_batched else None])
    v_body = vmap_graph(body_graph, body_in, size, carry_dims)
    if not pred_batched:
        (cg, ce), (bg, be) = P.close_graph(v_cond), P.close_graph(v_body)
        outs = P.while_p.bind(*ce, *cc, *be, *bc, *carry, cond_graph=cg, body_graph=bg,
                              cond_nconsts=len(ce) + nc, body_nconsts=len(be) + nb)
        return list(outs), carry_dims
    c_avals = [_aval_of(x) for x in cc]
    b_avals = [_aval_of(x) for x in bc]
    carry_avals = [_aval_of(x) for x in carry]

    def any_lane(*a):
        (pred,) = eval_graph(v_cond, list(a))
        return [P.gt(P.reduce_max(P.convert_element_type(pred, np.int32), (0,)), np.int32(0))]

    def frozen_step(*a):
        cca, bca, cur = list(a[:nc]), list(a[nc:nc + nb]), list(a[nc + nb:])
        (pred,) = eval_graph(v_cond, cca + cur)
        new = eval_graph(v_body, bca + cur)
        return [P.select(P.broadcast_in_dim(pred, shape_of(n), (0,)), n, c) for n, c in zip(new, cur)]

    cg, ce = trace_closed(any_lane, c_avals + carry_avals)
    bg, be = trace_closed(frozen_step, c_avals + b_avals + carry_avals)
    outs = P.while_p.bind(*ce, *cc, *be, *cc, *bc, *carry, cond_graph=cg, body_graph=bg,
                          cond_nconsts=len(ce) + nc, body_nconsts=len(be) + nc + nb)
    return list(outs), [0] * len(outs)


# --- forward mode ---------------------------------------------------------------------------------
# Each loop carries its tangents beside its values (a while too: forward mode needs no trip count),
# and each branch computes its tangents; which values get one is a fixed point over the body, as
# for activity.

def _tangent_outputs(graph: Graph, active: list[bool]) -> list[bool]:
    return [d and dtypes.is_float(v.aval.dtype) for d, v in zip(depends(graph, active), graph.outputs)]


def _zeros_for(tangents: list, values: list, which: list[bool]) -> list:
    """The tangents of the values marked in `which`, zeros where a tangent is None."""
    return [t if t is not None else _zeros(_aval_of(v)) for t, v, w in zip(tangents, values, which) if w]


def _jvp_body(body: Graph, active: list[bool], tangent_out: list[bool]) -> Callable:
    """fn(*body_inputs, *tangents of the active ones) -> body outputs + tangents of the marked outputs."""
    n = len(body.inputs)

    def fn(*args):
        it = iter(args[n:])
        outs, tans = jvp_eval(body, list(args[:n]), [next(it) if a else None for a in active])
        return list(outs) + _zeros_for(tans, outs, tangent_out)

    return fn


def _active(values: Sequence, tangents: Sequence) -> list[bool]:
    return [t is not None and dtypes.is_float(_aval_of(v).dtype) for v, t in zip(values, tangents)]


@def_jvp(P.scan_p)
def _scan_jvp(primals, tangents, *, body, length, reverse, num_consts, num_carry, unroll):
    consts, carry, xs = P.split_scan(list(primals), num_consts, num_carry)
    t_c, t_carry, t_x = P.split_scan(list(tangents), num_consts, num_carry)
    a_c, a_x = _active(consts, t_c), _active(xs, t_x)
    a_carry = carry_fixed_point(body, a_c, _active(carry, t_carry), a_x, _tangent_outputs)
    out_t = _tangent_outputs(body, a_c + a_carry + a_x)
    out_t[:num_carry] = a_carry
    ys_t = out_t[num_carry:]
    inner = _jvp_body(body, a_c + a_carry + a_x, out_t)
    n_c, n_carry, n_x = len(consts), len(carry), len(xs)
    tc, tcarry, tx = _zeros_for(t_c, consts, a_c), _zeros_for(t_carry, carry, a_carry), _zeros_for(t_x, xs, a_x)

    def step(*args):  # consts, const tangents, carry, carry tangents, xs, xs tangents (the scan's layout)
        k = [0, n_c, len(tc), n_carry, len(tcarry), n_x, len(tx)]
        at = np.cumsum(k)
        c, dc, h, dh, x, dx = (list(args[at[i]:at[i + 1]]) for i in range(6))
        outs = inner(*c, *h, *x, *dc, *dh, *dx)
        vals, tans = outs[:len(body.outputs)], outs[len(body.outputs):]
        return vals[:num_carry] + tans[:len(tcarry)] + vals[num_carry:] + tans[len(tcarry):]

    avals = [_aval_of(v) for v in (*consts, *tc, *carry, *tcarry)] + [
        _aval_of(v).update(shape=_aval_of(v).shape[1:]) for v in (*xs, *tx)]
    graph, extra = trace_closed(step, avals)
    outs = P.scan_p.bind(*extra, *consts, *tc, *carry, *tcarry, *xs, *tx, body=graph, length=length, reverse=reverse,
                         num_consts=len(extra) + n_c + len(tc), num_carry=n_carry + len(tcarry), unroll=unroll)
    n_ys = len(body.outputs) - num_carry
    carry_out, carry_t = outs[:n_carry], iter(outs[n_carry:n_carry + len(tcarry)])
    ys, ys_tans = outs[n_carry + len(tcarry):n_carry + len(tcarry) + n_ys], iter(outs[n_carry + len(tcarry) + n_ys:])
    return (list(carry_out) + list(ys),
            [next(carry_t) if a else None for a in a_carry] + [next(ys_tans) if a else None for a in ys_t])


@def_jvp(P.while_p)
def _while_jvp(primals, tangents, *, cond_graph, body_graph, cond_nconsts, body_nconsts):
    nc, nb = cond_nconsts, body_nconsts
    cc, bc, carry = list(primals[:nc]), list(primals[nc:nc + nb]), list(primals[nc + nb:])
    t_bc, t_carry = list(tangents[nc:nc + nb]), list(tangents[nc + nb:])
    a_bc = _active(bc, t_bc)
    a_carry = carry_fixed_point(body_graph, a_bc, _active(carry, t_carry), [], _tangent_outputs)
    tb, tcarry = _zeros_for(t_bc, bc, a_bc), _zeros_for(t_carry, carry, a_carry)
    inner = _jvp_body(body_graph, a_bc + a_carry, a_carry)
    n_carry = len(carry)

    def cond(*args):  # cond consts, carry, carry tangents (ignored)
        return eval_graph(cond_graph, list(args[:nc + n_carry]))

    def body(*args):  # body consts, their tangents, carry, carry tangents
        b, db = list(args[:nb]), list(args[nb:nb + len(tb)])
        h, dh = list(args[nb + len(tb):nb + len(tb) + n_carry]), list(args[nb + len(tb) + n_carry:])
        return inner(*b, *h, *db, *dh)

    carry_avals = [_aval_of(v) for v in (*carry, *tcarry)]
    cg, ce = trace_closed(cond, [_aval_of(v) for v in cc] + carry_avals)
    bg, be = trace_closed(body, [_aval_of(v) for v in (*bc, *tb)] + carry_avals)
    outs = P.while_p.bind(*ce, *cc, *be, *bc, *tb, *carry, *tcarry, cond_graph=cg, body_graph=bg,
                          cond_nconsts=len(ce) + nc, body_nconsts=len(be) + nb + len(tb))
    tans = iter(outs[n_carry:])
    return list(outs[:n_carry]), [next(tans) if a else None for a in a_carry]


@def_jvp(P.cond_p)
def _cond_jvp(primals, tangents, *, branches):
    index, ops, t_ops = primals[0], list(primals[1:]), list(tangents[1:])
    a_ops = _active(ops, t_ops)
    out_t = [any(ts) for ts in zip(*(_tangent_outputs(g, a_ops) for g in branches))]
    tops = _zeros_for(t_ops, ops, a_ops)
    avals = [_aval_of(v) for v in (*ops, *tops)]
    traced = [trace_closed(_jvp_body(g, a_ops, out_t), avals) for g in branches]
    extra = [x for _, e in traced for x in e]
    outs = P.cond_p.bind(index, *extra, *ops, *tops, branches=tuple(_share_leading(traced)))
    n = len(branches[0].outputs)
    tans = iter(outs[n:])
    return list(outs[:n]), [next(tans) if a else None for a in out_t]
