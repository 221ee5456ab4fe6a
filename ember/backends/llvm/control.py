"""Control-flow nodes (cond, while, scan) as native branches and loops in the function being emitted.

Each body graph is an internal function of the module, `void @body<k>(ptr ins, ptr outs, ptr ws)`
(graph.py emits it with the builder that emits the entry): `ins` and `outs` are arrays of data
pointers, `ws` its workspace. A loop keeps its carry in two regions of the node's scratch: step i
reads one and writes the other, then they swap (two phis), so no carry is copied per step; the
initial carry is copied in first and the final carry out last. A scan's step reads slice i of each
`xs` and writes slice i of each stacked output in place (length-1-i with `reverse`). `unroll` is
ignored: a trip runs one step (the values are the same; LLVM may inline and unroll small bodies).
The node's scratch is the two carry regions, then the bodies' workspace (bodies run one at a time,
so they share it). Nothing calls back into Python: the whole loop runs in native code.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from llvmlite import ir

from ember.backends.llvm import types as T
from ember.backends.llvm.entry import ALIGN
from ember.tracer import prims as P
from ember.tracer.ir import Graph, Literal, Node, Var


class _Builder(Protocol):
    """What this module needs of the function builder (graph._Builder, which imports this module)."""

    b: ir.IRBuilder
    kernel_region: int  # where the nodes' scratch starts in the workspace

    @property
    def ws(self) -> ir.Value: ...

    def literal_ptr(self, lit: Literal) -> ir.Value: ...

    def memcpy(self, dst: ir.Value, src: ir.Value, nbytes: int) -> None: ...

    def body_function(self, body: Graph, role: str) -> tuple[ir.Function, int]: ...


class _Pointers(Protocol):
    """Each graph value's data pointer in the function being emitted (graph._Pointers)."""

    def __getitem__(self, v: Var) -> ir.Value: ...


def _align(n: int) -> int:
    return -(-n // ALIGN) * ALIGN


def _nbytes(aval) -> int:
    return aval.size * aval.dtype.itemsize


class _Scratch:
    """Byte ranges of the node's scratch (from the builder's kernel region on), handed out in order."""

    def __init__(self, bld: _Builder):
        self.bld, self.used = bld, 0

    def take(self, nbytes: int) -> ir.Value:
        at = self.bld.kernel_region + self.used
        self.used += _align(max(nbytes, 1))
        return self.bld.b.gep(self.bld.ws, [T.index(at)], inbounds=True, source_etype=T.I8)


class _Carry:
    """A loop's carry: two regions of scratch, each holding every leaf at `offsets`."""

    def __init__(self, scratch: _Scratch, avals):
        self.sizes = [_nbytes(a) for a in avals]
        self.offsets, top = [], 0
        for n in self.sizes:
            self.offsets.append(top)
            top += _align(max(n, 1))
        self.regions = (scratch.take(top), scratch.take(top))

    def leaves(self, b: ir.IRBuilder, base: ir.Value) -> list[ir.Value]:
        return [b.gep(base, [T.index(o)], inbounds=True, source_etype=T.I8) for o in self.offsets]


def _operand(bld: _Builder, ptr: _Pointers, a) -> ir.Value:
    return ptr[a] if isinstance(a, Var) else bld.literal_ptr(a)


def _pointer_array(bld: _Builder, values: Sequence[ir.Value], name: str) -> ir.Value:
    """An array of `values` (pointers) on the stack of the function being emitted (its alloca sits in
    the entry block, so a loop reuses one slot), stored here."""
    b = bld.b
    if not values:
        return ir.Constant(T.PTR, None)
    block = b.block
    b.position_at_start(b.function.entry_basic_block)
    slot = b.alloca(T.PTR, size=ir.Constant(T.I32, len(values)), name=name)
    b.position_at_end(block)
    for k, v in enumerate(values):
        b.store(v, b.gep(slot, [T.index(k)], inbounds=True, source_etype=T.PTR))
    return slot


def _call(bld: _Builder, fn: ir.Function, ins: Sequence[ir.Value], outs: Sequence[ir.Value], ws: ir.Value) -> None:
    bld.b.call(fn, [_pointer_array(bld, ins, "ins"), _pointer_array(bld, outs, "outs"), ws])


def _copy_in(bld: _Builder, ptr: _Pointers, carry: _Carry, init: Sequence) -> None:
    for dst, a, n in zip(carry.leaves(bld.b, carry.regions[0]), init, carry.sizes):
        bld.memcpy(dst, _operand(bld, ptr, a), n)


def _copy_out(bld: _Builder, ptr: _Pointers, carry: _Carry, current: ir.Value, outs: Sequence[Var]) -> None:
    for src, v, n in zip(carry.leaves(bld.b, current), outs, carry.sizes):
        bld.memcpy(ptr[v], src, n)


def _loop_header(bld: _Builder, carry: _Carry, name: str, counter: bool):
    """Open a loop: the header block with phis for the current and the next carry region (and the
    step count); returns (header, pre-header block, cur, nxt, i or None)."""
    b = bld.b
    pre = b.block
    header = b.append_basic_block(f"{name}.head")
    b.branch(header)
    b.position_at_end(header)
    i = b.phi(T.I64, name="i") if counter else None
    cur, nxt = b.phi(T.PTR, name="cur"), b.phi(T.PTR, name="nxt")
    cur.add_incoming(carry.regions[0], pre)
    nxt.add_incoming(carry.regions[1], pre)
    if i is not None:
        i.add_incoming(T.index(0), pre)
    return header, cur, nxt, i


def _close_loop(bld: _Builder, header, cur, nxt) -> None:
    """End a trip: the regions swap, back to the header."""
    b = bld.b
    cur.add_incoming(nxt, b.block)
    nxt.add_incoming(cur, b.block)
    b.branch(header)


def _scan(bld: _Builder, node: Node, ptr: _Pointers) -> int:
    p = node.params
    consts, init, xs = P.split_scan(node.inputs, p["num_consts"], p["num_carry"])
    length, n_carry = p["length"], p["num_carry"]
    fn, body_ws = bld.body_function(p["body"], f"the scan body of {_where(node)}")
    scratch = _Scratch(bld)
    carry = _Carry(scratch, [v.aval for v in node.outputs[:n_carry]])
    ws = scratch.take(body_ws)
    _copy_in(bld, ptr, carry, init)
    const_ptrs = [_operand(bld, ptr, a) for a in consts]
    xs_ptrs = [(_operand(bld, ptr, a), _nbytes(a.aval) // max(length, 1)) for a in xs]
    ys_ptrs = [(ptr[v], _nbytes(v.aval) // max(length, 1)) for v in node.outputs[n_carry:]]
    b = bld.b
    header, cur, nxt, i = _loop_header(bld, carry, "scan", counter=True)
    step = b.append_basic_block("scan.step")
    done = b.append_basic_block("scan.done")
    b.cbranch(b.icmp_signed("<", i, T.index(length)), step, done)
    b.position_at_end(step)
    at = b.sub(T.index(length - 1), i) if p["reverse"] else i

    def sliced(pointers):
        return [b.gep(q, [b.mul(at, T.index(n))], inbounds=True, source_etype=T.I8) for q, n in pointers]

    _call(bld, fn, const_ptrs + carry.leaves(b, cur) + sliced(xs_ptrs), carry.leaves(b, nxt) + sliced(ys_ptrs), ws)
    i.add_incoming(b.add(i, T.index(1)), b.block)
    _close_loop(bld, header, cur, nxt)
    b.position_at_end(done)
    _copy_out(bld, ptr, carry, cur, node.outputs[:n_carry])
    return scratch.used


def _while(bld: _Builder, node: Node, ptr: _Pointers) -> int:
    p = node.params
    nc, nb = p["cond_nconsts"], p["body_nconsts"]
    cond_consts, body_consts, init = node.inputs[:nc], node.inputs[nc:nc + nb], node.inputs[nc + nb:]
    cond_fn, cond_ws = bld.body_function(p["cond_graph"], f"the while condition of {_where(node)}")
    body_fn, body_ws = bld.body_function(p["body_graph"], f"the while body of {_where(node)}")
    scratch = _Scratch(bld)
    carry = _Carry(scratch, [v.aval for v in node.outputs])
    flag = scratch.take(1)
    ws = scratch.take(max(cond_ws, body_ws))
    _copy_in(bld, ptr, carry, init)
    cc = [_operand(bld, ptr, a) for a in cond_consts]
    bc = [_operand(bld, ptr, a) for a in body_consts]
    b = bld.b
    header, cur, nxt, _ = _loop_header(bld, carry, "while", counter=False)
    _call(bld, cond_fn, cc + carry.leaves(b, cur), [flag], ws)
    step = b.append_basic_block("while.step")
    done = b.append_basic_block("while.done")
    b.cbranch(b.icmp_unsigned("!=", b.load(flag, typ=T.I8), ir.Constant(T.I8, 0)), step, done)
    b.position_at_end(step)
    _call(bld, body_fn, bc + carry.leaves(b, cur), carry.leaves(b, nxt), ws)
    _close_loop(bld, header, cur, nxt)
    b.position_at_end(done)
    _copy_out(bld, ptr, carry, cur, node.outputs)
    return scratch.used


def _cond(bld: _Builder, node: Node, ptr: _Pointers) -> int:
    """Switch on the index (clamped again, as lax did: cheap, and safe against a bad operand; the last
    branch is the switch's default) to the branch's call, which writes the node's outputs directly."""
    index, *ops = node.inputs
    branches = node.params["branches"]
    fns = [bld.body_function(g, f"branch {k} of {_where(node)}") for k, g in enumerate(branches)]
    scratch = _Scratch(bld)
    ws = scratch.take(max(n for _, n in fns))
    ins = [_operand(bld, ptr, a) for a in ops]
    outs = [ptr[v] for v in node.outputs]
    b = bld.b
    k = b.load(_operand(bld, ptr, index), typ=T.I32)
    k = b.select(b.icmp_signed("<", k, ir.Constant(T.I32, 0)), ir.Constant(T.I32, 0), k)
    join = b.append_basic_block("cond.join")
    blocks = [b.append_basic_block(f"cond.branch{j}") for j in range(len(branches))]
    switch = b.switch(k, blocks[-1])
    for j, block in enumerate(blocks[:-1]):
        switch.add_case(ir.Constant(T.I32, j), block)
    for (fn, _), block in zip(fns, blocks):
        b.position_at_end(block)
        _call(bld, fn, ins, outs, ws)
        b.branch(join)
    b.position_at_end(join)
    return scratch.used


def _where(node: Node) -> str:
    return f"{node.prim.name} at {node.loc}" if node.loc else node.prim.name


_EMIT = {P.scan_p: _scan, P.while_p: _while, P.cond_p: _cond}


def run_control(bld: _Builder, node: Node, ptr: _Pointers) -> int:
    """Emit `node`'s loop or branch in the function `bld` is emitting; the scratch bytes it needs."""
    return _EMIT[node.prim](bld, node, ptr)
