"""Control flow on the CUDA backends: the host walks the loop or picks the branch, the device runs the bodies.

A `cond`, `while` or `scan` node is no kernel. Its bodies are compiled with the graph that holds them
(program.py: their kernels go into the same module, so a jit function is one compile) as programs of
their own, each under `plan_memory(body)`: a body reads its inputs where they lie (inputs are
read-only) and writes its outputs into the buffers its caller hands it, as a whole graph does. At run
time the node is one step of its program (executable.py) whose call runs the bodies' launches per
trip; every buffer stays on the device, and bodies nest (a scan in a cond in a scan) by recursion.

- scan: the carry alternates between two buffer sets (a body never writes what it reads); step 0
  reads the initial carry where it is and the last step writes the node's results, so a carry is
  copied only for length 0 (the initial carry is the result). x and y slices are views of the stacked
  arrays (an offset, no copy) when a slice keeps the kernels' 16-byte vector accesses aligned or is
  too small for them (render.py vectorizes only spaces of `VECTOR_MIN` points); otherwise the slice
  goes through a staging buffer. `unroll` is ignored: a host loop gains nothing from it.
- while: the predicate is read back to the host before each trip, a device synchronization per trip;
  the final carry is copied to the results (the loop learns which trip is last only after it).
- cond: the branch index is read back once (a synchronization), clamped, and the branch writes the
  results.

Per trip the host only hands precomputed argument lists to the body (`prepare`: the carry buffers'
rotation and the slices, made once per call, or once per executable when no argument is the call's
own; a scan longer than `KEPT_STEPS` makes each step's as it goes, so memory stays flat).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ember.backends.cuda.render import VECTOR_BYTES, VECTOR_MIN
from ember.passes.inline import inline
from ember.tracer import prims as P
from ember.tracer.ir import Graph, Node

CONTROL_PRIMS = P.CONTROL_PRIMS
KEPT_STEPS = 4096  # a scan of at most this many steps lists its steps' arguments at once; longer ones stream them


def body_graphs(node: Node) -> list[Graph]:
    """The bodies of control node `node`, in the order its runner takes them (scan: body; while:
    cond_graph, body_graph; cond: the branches), with custom_vjp calls inlined (the pipeline inlines the
    graph holding them, not its bodies)."""
    p = node.params
    graphs = {P.scan_p: lambda: [p["body"]], P.while_p: lambda: [p["cond_graph"], p["body_graph"]],
              P.cond_p: lambda: list(p["branches"])}[node.prim]()
    return [inline(g) for g in graphs]


def _view_safe(aval) -> bool:
    """Whether a slice of this type may be passed as a view of its stacked array: its byte size keeps
    every slice at the stacked array's 16-byte alignment, or it is too small for a vector access."""
    return aval.size * aval.dtype.itemsize % VECTOR_BYTES == 0 or aval.size < VECTOR_MIN


def loop_buffers(node: Node) -> list[tuple[tuple, np.dtype]]:
    """The (shape, dtype) of each buffer the node's runner needs besides its bodies' workspaces, in the
    order it takes them (scan: two carry sets, then a staging buffer per x and y slice that is not a view;
    while: two carry sets and the predicate; cond: none)."""
    if node.prim is P.cond_p:
        return []
    if node.prim is P.while_p:
        carry = node.params["body_graph"].out_avals
        return [(a.shape, a.dtype) for a in carry] * 2 + [((), np.dtype(bool))]
    body, nk = node.params["body"], node.params["num_carry"]
    carry = [(a.shape, a.dtype) for a in body.out_avals[:nk]]
    slices = body.in_avals[node.params["num_consts"] + nk:] + body.out_avals[nk:]
    return carry * 2 + [(a.shape, a.dtype) for a in slices if not _view_safe(a)]


class _Scan:
    """A scan node's loop: `prepare(args)` (the node's operands, then its results) gives the body's
    argument lists per step; `run` launches the body once per step."""

    def __init__(self, node: Node, bodies: Sequence, buffers: Sequence, xp):
        p = node.params
        (self.body,) = bodies
        self.length, self.reverse = p["length"], p["reverse"]
        self.nc, self.nk = p["num_consts"], p["num_carry"]
        self.nops = len(node.inputs)
        nk = self.nk
        self.sets = (list(buffers[:nk]), list(buffers[nk:2 * nk]))
        stages = iter(buffers[2 * nk:])
        body = p["body"]
        self.x_stage = [None if _view_safe(a) else next(stages) for a in body.in_avals[self.nc + nk:]]
        self.y_stage = [None if _view_safe(a) else next(stages) for a in body.out_avals[nk:]]
        self.copyto = xp.copyto

    def prepare(self, args: Sequence) -> tuple:
        """The node's arguments split (consts, initial carry, xs, carry results, ys) and, for a scan of
        at most `KEPT_STEPS` steps, its steps listed (`_steps`); longer ones make them as they go."""
        split = (list(args[:self.nc]), list(args[self.nc:self.nc + self.nk]), args[self.nc + self.nk:self.nops],
                 list(args[self.nops:self.nops + self.nk]), args[self.nops + self.nk:])
        return split, list(self._steps(*split)) if self.length <= KEPT_STEPS else None

    def _steps(self, consts, init, xs, carry_out, ys):
        """Per step (i, ins, outs): the slice index, the body's inputs and outputs: the carry in its
        rotation (initial, set 0, set 1, set 0, ...; the last step writes the results) and the slices as
        views or staging buffers."""
        n, cur = self.length, init
        for step, i in enumerate(range(n - 1, -1, -1) if self.reverse else range(n)):
            nxt = carry_out if step == n - 1 else self.sets[step % 2]
            x_in = [x[i, ...] if s is None else s for x, s in zip(xs, self.x_stage)]
            y_out = [y[i, ...] if s is None else s for y, s in zip(ys, self.y_stage)]
            yield i, consts + cur + x_in, nxt + y_out
            cur = nxt

    def run(self, prepared: tuple) -> None:
        """The body once per step (staged slices copied in and out around it), or for length 0 the
        initial carry copied to the results."""
        split, steps = prepared
        _, init, xs, carry_out, ys = split
        copyto, body = self.copyto, self.body.run
        if not self.length:
            for out, value in zip(carry_out, init):
                copyto(out, value)
            return
        x_staged = [(k, s) for k, s in enumerate(self.x_stage) if s is not None]
        y_staged = [(k, s) for k, s in enumerate(self.y_stage) if s is not None]
        for i, ins, outs in self._steps(*split) if steps is None else steps:
            for k, s in x_staged:
                copyto(s, xs[k][i, ...])
            body(ins, outs)
            for k, s in y_staged:
                copyto(ys[k][i, ...], s)


class _While:
    """A while node's loop: the predicate read back before every trip (a device sync per trip), the
    body writing the carry set the previous trip did not, the final carry copied to the results."""

    def __init__(self, node: Node, bodies: Sequence, buffers: Sequence, xp):
        p = node.params
        self.cond, self.body = bodies
        self.ncc, self.nbc = p["cond_nconsts"], p["body_nconsts"]
        self.nops = len(node.inputs)
        nk = self.nops - self.ncc - self.nbc
        self.sets = (list(buffers[:nk]), list(buffers[nk:2 * nk]))
        self.pred = buffers[2 * nk]
        self.copyto = xp.copyto

    def prepare(self, args: Sequence) -> tuple:
        """The cond's and the body's argument lists for each place the carry may be (the initial
        carry, set 0, set 1), and the results."""
        cc, bc = list(args[:self.ncc]), list(args[self.ncc:self.ncc + self.nbc])
        places = [list(args[self.ncc + self.nbc:self.nops]), *self.sets]
        # the body reading place k writes place nxt[k]: initial -> set 0 -> set 1 -> set 0 ...
        nxt = (1, 2, 1)
        trips = [(cc + places[k], bc + places[k], places[nxt[k]], nxt[k]) for k in range(3)]
        return trips, places, list(args[self.nops:])

    def run(self, prepared: tuple) -> None:
        """Trips until the predicate is false, then the carry (wherever it ended) copied out."""
        trips, places, results = prepared
        pred, cond, body = [self.pred], self.cond.run, self.body.run
        k = 0
        while True:
            cond_in, body_in, body_out, after = trips[k]
            cond(cond_in, pred)
            if not self.pred.item():  # a device sync: the host needs the predicate to go on
                break
            body(body_in, body_out)
            k = after
        for out, value in zip(results, places[k]):
            self.copyto(out, value)


class _Cond:
    """A cond node: the index read back once (a device sync), clamped to the branches, and that branch
    run on the operands, writing the results."""

    def __init__(self, node: Node, bodies: Sequence, buffers: Sequence, xp):
        self.branches = list(bodies)
        self.nops = len(node.inputs)

    def prepare(self, args: Sequence) -> tuple:
        """(the index array, the branches' operands, the results)."""
        return args[0], list(args[1:self.nops]), list(args[self.nops:])

    def run(self, prepared: tuple) -> None:
        """The branch the index names (read back: a device sync), writing the results."""
        index, ops, results = prepared
        k = min(max(int(index.item()), 0), len(self.branches) - 1)
        self.branches[k].run(ops, results)


RUNNERS = {P.scan_p: _Scan, P.while_p: _While, P.cond_p: _Cond}


def runner(node: Node, bodies: Sequence, buffers: Sequence, xp):
    """The host side of control node `node`: `bodies` are its bodies' launches bound to the workspace
    (each with `run(ins, outs)`), `buffers` its `loop_buffers` as device arrays, `xp` NumPy or CuPy."""
    return RUNNERS[node.prim](node, bodies, buffers, xp)
