"""lax's structured control flow: `cond`, `switch`, `while_loop`, `fori_loop`, `scan`, `map`, `select_n`.

JAX's names, signatures and semantics. Each body is traced once into a closed subgraph (what it reads
from outside becomes an operand of the node), so a loop is one node in the graph whatever its trip
count: it compiles in the time its body takes, never unrolled. `fori_loop` with static bounds is a
`scan` (so reverse mode works, as in JAX); with traced bounds a `while_loop`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from ember.errors import ArgumentValueError, ShapeError, user_location
from ember.tracer import dtypes
from ember.tracer import prims as P
from ember.tracer.aval import ShapedArray
from ember.tracer.ir import Graph
from ember.tracer.trace import Tracer, new_builder
from ember.tree import PyTreeDef, tree_flatten, tree_flatten_with_keystr, tree_unflatten


def _aval(x, what: str) -> ShapedArray:
    if isinstance(x, Tracer):
        return x.aval
    if isinstance(x, (bool, int, float, complex)):
        dt, weak = dtypes.scalar_dtype(x)
        return ShapedArray((), dt, weak)
    try:
        a = np.asarray(x)
    except Exception:
        a = None
    if a is None or a.dtype == object:
        raise ShapeError(f"{what}: {type(x).__name__} value {x!r:.60} is not an array", user_location())
    return ShapedArray(a.shape, dtypes.canonicalize(a.dtype))


def _avals(leaves: Sequence, what: str) -> list[ShapedArray]:
    return [_aval(x, what) for x in leaves]


def _trace_closed(fun: Callable, in_avals: Sequence[ShapedArray], in_tree: PyTreeDef) -> tuple[Graph, list, PyTreeDef]:
    """`fun(*args)` traced on `in_avals` (flat, structured by `in_tree`, a tuple of the arguments) into
    a closed graph: what it reads from outside (tracers of the caller, arrays) becomes leading inputs.
    Returns (graph, the values of those leading inputs, the output structure)."""
    with new_builder() as b:
        args = [b.new_input(a) for a in in_avals]
        out = fun(*tree_unflatten(in_tree, args))
        leaves, out_tree = tree_flatten(out)
        graph = b.build(leaves)
    closed, values = P.close_graph(graph)
    return closed, values, out_tree


def _type_text(a: ShapedArray) -> str:
    return a.str_short() + (" (weak)" if a.weak_type else "")


def _check_carry(what: str, init, in_avals, out_avals, in_tree: PyTreeDef, out_tree: PyTreeDef) -> dict:
    """The carry comes back with its structure, shapes and dtypes (a TypeError naming the leaf, both types
    and the user's line otherwise). A weakly typed initial value (a Python scalar) may come back in
    another dtype or strongly typed, as in JAX: returns {leaf: the type it takes} for those."""
    if in_tree != out_tree:
        raise ShapeError(f"{what} must return the carry with the structure it was given: the input carry is "
                         f"{in_tree}, the returned carry {out_tree}", user_location())
    paths = [p for p, _ in tree_flatten_with_keystr(init)[0]]
    promote = {}
    for k, (path, a, b) in enumerate(zip(paths, in_avals, out_avals)):
        if a.shape != b.shape or (a.dtype != b.dtype and not a.weak_type):
            why = "the shapes" if a.shape != b.shape else "the dtypes"
            raise ShapeError(f"{what} must return a carry of the types it was given: carry{path} comes in as "
                             f"{_type_text(a)} but goes out as {_type_text(b)}, so {why} differ; convert "
                             f"it (e.g. .astype) or give the initial value that type", user_location())
        if a.weak_type and (a.dtype != b.dtype or not b.weak_type):
            promote[k] = b
    return promote


def _promoted(avals: list[ShapedArray], leaves: list, promote: dict) -> tuple[list, list]:
    """Those weakly typed carry leaves converted to the types the body gives them."""
    avals, leaves = list(avals), list(leaves)
    for k, b in promote.items():
        avals[k] = b
        # outside a trace a Python scalar stays one (weak) through convert_element_type: make it an array
        leaves[k] = (P.convert_element_type(leaves[k], b.dtype, weak_type=b.weak_type) if isinstance(leaves[k], Tracer)
                     else np.asarray(leaves[k], b.dtype))
    return avals, leaves


# --- scan -----------------------------------------------------------------------------------------

def scan(f: Callable, init, xs=None, length: int | None = None, reverse: bool = False, unroll: int | bool = 1,
         _split_transpose: bool = False):
    """Loop `carry, y = f(carry, x)` over the leading axis of `xs`; returns (final carry, stacked ys)."""
    x_leaves, x_tree = tree_flatten(xs)
    x_avals = _avals(x_leaves, "scan xs")
    lengths = {a.shape[0] for a in x_avals if a.shape}
    if any(not a.shape for a in x_avals):
        raise ShapeError("scan got a scalar in xs: every xs leaf needs a leading axis to scan over", user_location())
    if length is not None:
        length = _static_int(length, "scan length")
        lengths.add(length)
    if len(lengths) > 1:
        raise ArgumentValueError(f"scan got values with different leading axis sizes: "
                                 f"{', '.join(str(n) for n in sorted(lengths))}", user_location())
    if not lengths:
        raise ArgumentValueError("scan got no values to scan over and `length` not provided", user_location())
    (n,) = lengths
    unroll = n if unroll is True else 1 if unroll is False else max(1, _static_int(unroll, "scan unroll"))
    c_leaves, c_tree = tree_flatten(init)
    c_avals = _avals(c_leaves, "scan init")
    slice_avals = [a.update(shape=a.shape[1:]) for a in x_avals]
    for _ in range(2):
        graph, consts, out_tree = _trace_closed(f, c_avals + slice_avals, tree_flatten((init, xs))[1])
        if out_tree.node is not tuple or len(out_tree.children) != 2:
            raise ShapeError(f"scan body must return a pair (carry, y), got {out_tree}", user_location())
        nc = len(c_leaves)
        out_avals = graph.out_avals
        weak = _check_carry("scan body", init, c_avals, out_avals[:nc], c_tree, out_tree.children[0])
        if not weak:
            break
        c_avals, c_leaves = _promoted(c_avals, c_leaves, weak)
    outs = P.scan_p.bind(*consts, *c_leaves, *x_leaves, body=graph, length=n, reverse=bool(reverse),
                         num_consts=len(consts), num_carry=nc, unroll=min(unroll, max(n, 1)))
    return tree_unflatten(c_tree, outs[:nc]), tree_unflatten(out_tree.children[1], outs[nc:])


def map(f: Callable, xs, *, batch_size: int | None = None):
    """`f` applied to each slice of `xs` along its leading axis, results stacked (one step per slice;
    `batch_size` only groups work in JAX and gives the same values, so it is accepted and not needed)."""
    if batch_size is not None:
        _static_int(batch_size, "map batch_size")
    return scan(lambda _, x: ((), f(x)), (), xs)[1]


def _static_int(v, what: str) -> int:
    if isinstance(v, Tracer) or isinstance(v, bool) or not isinstance(v, (int, np.integer)):
        raise ArgumentValueError(f"{what} must be a static Python int, got {type(v).__name__}", user_location())
    return int(v)


# --- while_loop and fori_loop ---------------------------------------------------------------------

def while_loop(cond_fun: Callable, body_fun: Callable, init_val):
    """Run `val = body_fun(val)` while `cond_fun(val)`; returns the final value (JAX's `while_loop`)."""
    c_leaves, c_tree = tree_flatten(init_val)
    c_avals = _avals(c_leaves, "while_loop init_val")
    for _ in range(2):
        in_tree = tree_flatten((init_val,))[1]
        cond_graph, cond_consts, cond_tree = _trace_closed(cond_fun, c_avals, in_tree)
        pred = cond_graph.out_avals
        if cond_tree.num_leaves != 1 or pred[0].shape != () or pred[0].dtype != np.dtype(bool):
            raise ShapeError(f"while_loop cond_fun must return a boolean scalar, but got output type(s) "
                             f"{[_type_text(a) for a in pred]}", user_location())
        body_graph, body_consts, body_tree = _trace_closed(body_fun, c_avals, in_tree)
        weak = _check_carry("while_loop body_fun", init_val, c_avals, body_graph.out_avals, c_tree, body_tree)
        if not weak:
            break
        c_avals, c_leaves = _promoted(c_avals, c_leaves, weak)
    outs = P.while_p.bind(*cond_consts, *body_consts, *c_leaves, cond_graph=cond_graph, body_graph=body_graph,
                          cond_nconsts=len(cond_consts), body_nconsts=len(body_consts))
    return tree_unflatten(c_tree, outs)


def _bound_dtype(x) -> np.dtype:
    """A loop bound's dtype: a Python int is int32 (weak, as in JAX); anything else must be an integer."""
    if isinstance(x, int) and not isinstance(x, bool):
        return np.dtype(np.int32)
    dt = np.dtype(getattr(x, "dtype", None) or np.asarray(x).dtype)
    if not np.issubdtype(dt, np.integer):
        raise ShapeError(f"fori_loop bounds must be integers, got {dt}", user_location())
    return dt


def fori_loop(lower, upper, body_fun: Callable, init_val, *, unroll: int | bool | None = None):
    """`val = body_fun(i, val)` for i in [lower, upper): a `scan` when both bounds are static (so it is
    reverse-differentiable, as in JAX), else a `while_loop`."""
    static = not isinstance(lower, Tracer) and not isinstance(upper, Tracer)
    dt = np.result_type(*(_bound_dtype(x) for x in (lower, upper)))
    if static:
        lo, hi = int(lower), int(upper)

        def step(carry, _):
            i, val = carry
            return (P.add(i, np.ones((), dt)[()]), body_fun(i, val)), None

        (_, out), _ = scan(step, (np.asarray(lo, dt), init_val), None, length=max(hi - lo, 0),
                           unroll=1 if unroll is None else unroll)
        return out
    if unroll not in (None, 1, False):
        raise ArgumentValueError("fori_loop: unroll needs static bounds (lower and upper known while tracing)",
                                 user_location())

    def cond(carry):
        return P.lt(carry[0], carry[1])

    def body(carry):
        i, hi, val = carry
        return P.add(i, np.ones((), dt)[()]), hi, body_fun(i, val)

    lower = lower if isinstance(lower, Tracer) else np.asarray(lower, dt)
    upper = upper if isinstance(upper, Tracer) else np.asarray(upper, dt)
    return while_loop(cond, body, (P.convert_element_type(lower, dt), P.convert_element_type(upper, dt),
                                   init_val))[2]


# --- cond and switch ------------------------------------------------------------------------------

def switch(index, branches: Sequence[Callable], *operands, operand=None):
    """`branches[clamp(index, 0, len-1)](*operands)`, all branches traced (JAX's `switch`)."""
    if operand is not None:
        operands = operands + (operand,)
    branches = list(branches)
    if not branches:
        raise ArgumentValueError("switch needs at least one branch", user_location())
    idx_aval = _aval(index, "switch index")
    if idx_aval.shape != () or not (np.issubdtype(idx_aval.dtype, np.integer) or idx_aval.dtype == bool):
        raise ShapeError(f"switch index must be a scalar integer, got {_type_text(idx_aval)}", user_location())
    index = P.convert_element_type(index, np.int32)
    if len(branches) > 1:
        index = P.minimum(P.maximum(index, np.int32(0)), np.int32(len(branches) - 1))
    return _cond(index, branches, operands)


def cond(pred, true_fun: Callable, false_fun: Callable, *operands, operand=None):
    """`true_fun(*operands)` if `pred` else `false_fun(*operands)`, both traced (JAX's `cond`)."""
    if operand is not None:
        operands = operands + (operand,)
    a = _aval(pred, "cond pred")
    if a.shape != ():
        raise ShapeError(f"Pred must be a scalar, got {_type_text(a)}", user_location())
    if a.dtype != bool:
        if not (np.issubdtype(a.dtype, np.number)):
            raise ShapeError(f"Pred type must be either boolean or number, got {a.dtype}", user_location())
        pred = P.ne(pred, np.zeros((), a.dtype)[()])
    return _cond(P.convert_element_type(pred, np.int32), [false_fun, true_fun], operands)


def _cond(index, branches: list[Callable], operands: tuple):
    o_leaves, o_tree = tree_flatten(operands)
    o_avals = _avals(o_leaves, "cond operands")
    traced = [_trace_closed(br, o_avals, o_tree) for br in branches]
    out_tree = traced[0][2]
    for k, (g, _, tree) in enumerate(traced[1:], 1):
        _check_branch(k, len(branches), tree, out_tree, g, traced[0][0])
    # every branch takes every branch's closed-over values (a branch ignores the others')
    all_consts = [c for _, consts, _ in traced for c in consts]
    graphs = P.share_leading([g for g, _, _ in traced], [len(consts) for _, consts, _ in traced])
    outs = P.cond_p.bind(index, *all_consts, *o_leaves, branches=tuple(graphs))
    return tree_unflatten(out_tree, outs)


def _check_branch(k: int, n: int, tree, first_tree, g: Graph, first: Graph) -> None:
    """Branch k returns what branch 0 returns: structure, shapes and dtypes (JAX's TypeError otherwise)."""
    base, name = ("false_fun", "true_fun") if n == 2 else ("branch 0", f"branch {k}")
    if tree != first_tree:
        raise ShapeError(f"{base} and {name} output must have same type structure, got {first_tree} and {tree}",
                         user_location())
    paths = [p for p, _ in tree_flatten_with_keystr(tree_unflatten(tree, [0] * tree.num_leaves))[0]]
    for path, a, b in zip(paths, first.out_avals, g.out_avals):
        if not a.same_type(b):
            raise ShapeError(f"{base} and {name} output must have identical types: output{path} is "
                             f"{_type_text(a)} in {base} but {_type_text(b)} in {name}", user_location())


def select_n(which, *cases):
    """`cases[which]` elementwise: `which` is bool (two cases) or int32; shapes equal or `which` scalar."""
    if not cases:
        raise ArgumentValueError("select_n needs at least one case", user_location())
    a = _aval(which, "select_n which")
    if a.dtype == bool:
        if len(cases) > 2:
            raise ShapeError(f"select_n with a bool `which` takes at most 2 cases, got {len(cases)}", user_location())
        return cases[0] if len(cases) == 1 else P.select(which, cases[1], cases[0])
    if not np.issubdtype(a.dtype, np.integer):
        raise ShapeError(f"select_n `which` must be bool or an integer, got {a.dtype}", user_location())
    out = cases[-1]
    for k in range(len(cases) - 2, -1, -1):
        out = P.select(P.eq(which, np.asarray(k, a.dtype)[()]), cases[k], out)
    return out
