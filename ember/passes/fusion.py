"""Fusion: group nodes into `fusion` nodes, the kernels every backend renders (XLA style).

Each node starts as its own group. Visiting consumers last to first (XLA's instruction fusion), a
group takes in the producers of its operands: a producer read only by the group moves in; one read
elsewhere too is recomputed in the group when it is cheap and every reader can do the same (else it
is written once anyway), or the producer's whole group merges with this one and the value becomes an
extra output (multi-output fusion). Then every edge still between two groups is tried again, and
groups over one iteration space sharing an input merge (sibling fusion), until nothing changes. What a
kernel may hold is `fusion_rules.check_body`; a merge never creates a cycle (Pearce-Kelly: groups keep
a topological rank, and a merge reorders only the groups between the two). Every edge left between
two kernels records one refusal (explain.py) naming the rule that kept it apart.
"""

from __future__ import annotations

from itertools import islice

from ember.passes import fusion_rules as R
from ember.passes.explain import refuse
from ember.tracer import prims as P
from ember.tracer.ir import Graph, Node, Params, Var

SEARCH_LIMIT = 64  # kernels a cycle check visits before it gives up (and refuses): keeps the pass linear
EDGE_LIMIT = 16 * SEARCH_LIMIT  # edges it follows
TOO_FAR = f"could create a cycle: more than {SEARCH_LIMIT} kernels lie between them, too many to check"


class _Group:
    """Nodes computed in one kernel: `members` own their values; `copies` recompute cheap ones."""

    __slots__ = ("members", "copies", "rank")

    def __init__(self, node: Node, rank: int):
        self.members = {node: None}  # dicts: ordered sets
        self.copies: dict[Node, None] = {}
        self.rank = rank

    def has(self, node: Node) -> bool:
        return node in self.members or node in self.copies

    def body(self, pos) -> list[Node]:
        return sorted([*self.members, *(c for c in self.copies if c not in self.members)], key=pos.__getitem__)


class _Fuser:
    def __init__(self, graph: Graph):
        self.graph = graph
        self.pos = {n: i for i, n in enumerate(graph.nodes)}
        self.producer: dict[Var, Node] = {}
        self.consumers: dict[Var, list[Node]] = {}
        for n in graph.nodes:
            for v in n.outputs:
                self.producer[v] = n
            for a in dict.fromkeys(a for a in n.inputs if isinstance(a, Var)):
                self.consumers.setdefault(a, []).append(n)
        self.graph_outs = {v for v in graph.outputs if isinstance(v, Var)}
        self.owner = {n: _Group(n, i) for i, n in enumerate(graph.nodes)}
        self.dead: set[Node] = set()
        self.static: dict[tuple[Node, Node], R.Reason | tuple] = {}  # edge_reason, computed once per edge
        self.kept: dict[Node, tuple | None] = {}  # kept_reason, once per node
        self.reads: dict[Var, dict[_Group, int]] = {}  # value -> groups whose body reads it -> how many nodes
        for n in graph.nodes:
            self.count(n, self.owner[n], 1)

    def count(self, node: Node, g: _Group, delta: int) -> None:
        for a in dict.fromkeys(a for a in node.inputs if isinstance(a, Var)):
            d = self.reads.setdefault(a, {})
            d[g] = d.get(g, 0) + delta
            if not d[g]:
                del d[g]

    # -- the group graph -------------------------------------------------------------------------

    def all_readers(self, v: Var) -> list[_Group]:
        """Groups whose body reads `v` (from wherever they get it)."""
        return list(self.reads.get(v, ()))

    def readers(self, v: Var) -> list[_Group]:
        """Groups that read `v` from memory (they do not compute it themselves)."""
        p = self.producer[v]
        return [g for g in self.all_readers(v) if not g.has(p)]

    def read_outside(self, v: Var, skip) -> bool:
        p = self.producer[v]
        return any(g not in skip and not g.has(p) for g in self.reads.get(v, ()))

    def outputs(self, members, skip=()) -> list[Var]:
        return [v for n in members for v in n.outputs if v in self.graph_outs or self.read_outside(v, skip)]

    def inputs(self, body: list[Node]) -> list[Var]:
        inside = {v for n in body for v in n.outputs}
        return list(dict.fromkeys(a for n in body for a in n.inputs if isinstance(a, Var) and a not in inside))

    def succ(self, g: _Group):
        """The groups reading `g`'s values (lazily, with repeats): every result of a node with several
        (a scan's), not only its first, or a merge could reorder a reader before it."""
        for n in g.members:
            for v in n.outputs:
                for h in self.reads.get(v, ()):
                    if h is not g and not h.has(n):
                        yield h

    def pred(self, g: _Group) -> list[_Group]:
        body = g.body(self.pos)
        return list(dict.fromkeys(self.owner[self.producer[v]] for v in self.inputs(body) if v in self.producer))

    def check(self, members, copies, skip) -> R.Reason | None:
        body = sorted(dict.fromkeys([*members, *(c for c in copies if c not in members)]), key=self.pos.__getitem__)
        outs = self.outputs(sorted(members, key=self.pos.__getitem__), skip)
        return R.check_body(body, outs, len(self.inputs(body)))

    # -- actions ---------------------------------------------------------------------------------

    def attempt(self, p: Node, u: Node, operand: int, b: _Group) -> R.Reason | None:
        """Fuse producer `p` into group `b` (where `u` reads it); None when done, else why not."""
        a = self.owner[p]
        if a is b or b.has(p):
            return None
        why = self.static.get((p, u))
        if why is None:
            why = self.static[p, u] = R.edge_reason(p, u, operand) or ()
        if why:
            return why
        v = p.outputs[0]
        readers = self.reads.get(v, {})
        others = len(readers) > (b in readers) or v in self.graph_outs
        copy_why = None
        if others:
            copy_why = self.copy_reason(p, u, b)
            if copy_why is None:
                self.copy(p, b)
                return None
        if others and v.aval.size <= 1:
            return copy_why  # a scalar is cheap to read: no multi-output fusion for it
        merge_why = self.check(list(a.members) + list(b.members), {**a.copies, **b.copies}, (a, b))
        if merge_why is None:
            merge_why = self.merge(a, b)
            if merge_why is None:
                return None
        if merge_why[0] == "cycle":
            return "cycle", f"fusing {R.where(p)} with {R.where(u)} {merge_why[1]}"
        return copy_why or merge_why

    def copy_reason(self, p: Node, u: Node, b: _Group) -> R.Reason | None:
        v = p.outputs[0]
        k = len(self.reads.get(v, ()))
        if R.expensive(p):
            return "expensive-duplicate", f"{R.where(p)} would be duplicated into {k} kernels"
        if p not in self.kept:
            self.kept[p] = self.kept_reason(p)
        if self.kept[p]:
            rule, fmt = self.kept[p]
            return rule, fmt.format(u=R.where(u))
        return self.check(b.members, {**b.copies, p: None}, (b,))

    def kept_reason(self, p: Node) -> tuple | None:
        """Why `p`'s value is written to memory whoever else reads it (a message template), or None."""
        v = p.outputs[0]
        maxes = [c for c in self.consumers[v] if c.prim in R.MAX_LIKE]
        if maxes:
            return ("reduce-max-shared", f"{R.where(p)} feeds {R.where(maxes[0])} and {{u}}: it is computed once, "
                    "since recomputing it with different rounding can give inf or NaN")
        if v in self.graph_outs:
            return "materialized", f"{R.where(p)} is an output, so {{u}} reads it rather than recompute it"
        for c in self.consumers[v]:
            if R.edge_reason(p, c, c.inputs.index(v)):
                return "materialized", (f"{R.where(p)} is written for {R.where(c)} anyway, so {{u}} reads it rather "
                                        "than recompute it")
        return None

    def copy(self, p: Node, b: _Group) -> None:
        b.copies[p] = None
        self.count(p, b, 1)
        self.kill_if_dead(p)

    def kill_if_dead(self, p: Node) -> None:
        if p in self.dead or any(v in self.graph_outs or self.reads.get(v) for v in p.outputs):
            return
        g = self.owner[p]
        if len(g.members) > 1:
            return  # group bodies are pruned when built
        self.dead.add(p)
        self.count(p, g, -1)
        for a in p.inputs:
            if isinstance(a, Var) and a in self.producer:
                self.kill_if_dead(self.producer[a])

    def merge(self, a: _Group, b: _Group) -> R.Reason | None:
        """Merge groups `a` and `b` into `b` unless that creates a cycle; keeps the ranks topological."""
        lo, hi = (a, b) if a.rank < b.rank else (b, a)
        after = list(islice(self.succ(lo), EDGE_LIMIT + 1))
        if len(after) <= EDGE_LIMIT and all(g is hi or g.rank > hi.rank for g in after):
            fwd, through = [], None
        elif all(g is lo or g.rank < lo.rank for g in self.pred(hi)):
            fwd, through = [], None
            hi.rank, lo.rank = lo.rank, hi.rank  # b takes the lower rank below
        else:
            fwd, through = self.reach(lo, hi, self.succ, lambda g: g.rank < hi.rank)
        if through is not None:
            node = max(through.members, key=self.pos.__getitem__)
            return "cycle", f"would create a cycle through {R.where(node)}"
        if fwd is None:
            return "cycle", TOO_FAR
        if fwd:
            back, _ = self.reach(hi, lo, self.pred, lambda g: g.rank > lo.rank)
            if back is None:
                return "cycle", TOO_FAR
            slots = sorted([lo.rank, hi.rank] + [g.rank for g in (*fwd, *back)])
            order = sorted(back, key=lambda g: g.rank) + [b] + sorted(fwd, key=lambda g: g.rank)
            for g, r in zip(order, slots):
                g.rank = r
        else:
            b.rank = hi.rank
        for n in a.members:
            self.owner[n] = b
            b.members[n] = None
            self.count(n, a, -1)
            self.count(n, b, 0 if b.copies.pop(n, 1) is None else 1)
        for c in a.copies:
            self.count(c, a, -1)
            if not b.has(c):
                b.copies[c] = None
                self.count(c, b, 1)
        return None

    def reach(self, start: _Group, goal: _Group, step, within):
        """Groups reachable from `start` (not through `goal`) that satisfy `within`, and the group from
        which `goal` is reached along such a path, if any; (None, None) when the search is too long."""
        seen: dict[_Group, None] = {}
        budget = EDGE_LIMIT
        stack = [start]
        while stack:
            g = stack.pop()
            for h in step(g):
                budget -= 1
                if budget < 0 or len(seen) >= SEARCH_LIMIT:
                    return None, None  # too far to tell: the caller refuses
                if h is goal and g is not start:
                    return list(seen), g
                if h is not start and h is not goal and h not in seen and within(h):
                    seen[h] = None
                    stack.append(h)
        return list(seen), None

    # -- the driver ------------------------------------------------------------------------------

    def edges(self, g: _Group):
        """(producer, consumer, operand index) for every value `g`'s body reads from another group."""
        for u in g.body(self.pos):
            for i, a in enumerate(u.inputs):
                if isinstance(a, Var) and a in self.producer and not g.has(self.producer[a]):
                    yield self.producer[a], u, i

    def grow(self, g: _Group) -> bool:
        """Take producers into `g` until none more fits; whether anything changed."""
        changed, again = False, True
        while again:
            again = False
            for p, u, i in list(self.edges(g)):
                if g.has(u) and not g.has(p) and p not in self.dead and self.attempt(p, u, i, g) is None:
                    changed = again = True
        return changed

    def siblings(self) -> bool:
        """Merge groups that read one input over the same iteration space (multi-output fusion)."""
        changed = False
        values = [*self.graph.inputs, *self.graph.consts, *(v for n in self.live() for v in n.outputs)]
        for v in values:
            if v.aval.size <= 1:
                continue
            readers = [g for g in self.readers_of_input(v) if self.over(g, v)]
            for g in readers[1:]:
                first = self.owner[next(iter(readers[0].members))]
                if first is g or self.check(list(first.members) + list(g.members), {**first.copies, **g.copies},
                                            (first, g)) is not None:
                    continue
                if self.merge(g, first) is None:
                    changed = True
        return changed

    def readers_of_input(self, v: Var) -> list[_Group]:
        if v in self.producer:
            return self.readers(v)
        return list(dict.fromkeys(g for g in self.all_readers(v)))

    def over(self, g: _Group, v: Var) -> bool:
        """Whether `g` is a fusible kernel iterating over `v`'s shape (no contraction: it reads operands whole)."""
        body = g.body(self.pos)
        if any(not R.fusible(n) or n.prim.kind == "contraction" for n in body):
            return False
        red = [n for n in body if n.prim.kind == "reduction"]
        space = red[0].inputs[0].aval.shape if red else self.outputs(body)[0].aval.shape if self.outputs(body) else None
        return space == v.aval.shape

    def live(self) -> list[Node]:
        return [n for n in self.graph.nodes if n not in self.dead]

    def epilogue(self, dot: Node) -> None:
        """Grow `dot`'s group forward with the elementwise consumers of its shape (bias, activation)."""
        g, shape = self.owner[dot], dot.outputs[0].aval.shape
        work = [dot]
        while work:
            n = work.pop(0)
            for c in self.consumers.get(n.outputs[0], ()):
                h = self.owner[c]
                if (h is g or len(h.members) > 1 or c.prim.kind != "elementwise"
                        or c.outputs[0].aval.shape != shape):
                    continue
                if self.check([*g.members, c], g.copies, (g, h)) is None and self.merge(h, g) is None:
                    work.append(c)
        self.grow(g)

    def run(self) -> None:
        for n in self.graph.nodes:
            if n.prim.kind == "contraction" and len(self.owner[n].members) == 1:  # dot, convolution
                self.epilogue(n)
        for n in reversed(self.graph.nodes):
            g = self.owner[n]
            if n not in self.dead and len(g.members) == 1 and not g.copies:
                self.grow(g)
        changed = True
        while changed:
            changed = False
            for g in self.groups():
                changed |= self.grow(g)
            changed |= self.siblings()

    def groups(self) -> list[_Group]:
        return sorted(dict.fromkeys(self.owner[n] for n in self.live()), key=lambda g: g.rank)

    def refusals(self) -> None:
        """One refusal per producer->consumer edge left between two kernels."""
        seen: set[tuple[Node, Node]] = set()
        for g in self.groups():
            for p, u, i in self.edges(g):
                if (p, u) in seen:
                    continue
                seen.add((p, u))
                why = self.attempt(p, u, i, g)
                assert why is not None, "fusion reached a fixed point"
                refuse("fusion", why[0], why[1], (p, u))

    # -- the fused graph -------------------------------------------------------------------------

    def build(self) -> Graph:
        nodes: list[Node] = []
        for g in self.groups():
            body = self.needed(g)
            if len(body) == 1:
                nodes.append(body[0])
            elif body:
                nodes.append(self.fusion_node(g, body))
        return self.graph.replace(nodes=nodes)

    def needed(self, g: _Group) -> list[Node]:
        """`g`'s body without the nodes none of its outputs depends on."""
        body = g.body(self.pos)
        live = set(self.outputs([n for n in body if n in g.members]))
        kept = []
        for n in reversed(body):
            if any(v in live for v in n.outputs):
                kept.append(n)
                live.update(a for a in n.inputs if isinstance(a, Var))
        return kept[::-1]

    def fusion_node(self, g: _Group, body: list[Node]) -> Node:
        outs = self.outputs([n for n in body if n in g.members])
        ins = self.inputs(body)
        rename = {v: Var(v.aval) for v in ins}
        inner = []
        for n in body:
            args = [rename[a] if isinstance(a, Var) else a for a in n.inputs]
            new = [Var(v.aval) for v in n.outputs]
            rename.update(zip(n.outputs, new))
            inner.append(Node(n.prim, args, n.params, new, n.loc, n.role))
        sub = Graph([rename[v] for v in ins], inner, [rename[v] for v in outs])
        root = body[-1]
        return Node(P.fusion_p, ins, Params(body=sub, kind=_kind(body, outs)), outs, root.loc, root.role)


def _kind(body: list[Node], outs: list[Var]) -> str:
    if any(n.prim.kind == "contraction" for n in body):
        return "epilogue"
    if any(n.prim.kind == "reduction" for n in body):
        return "reduction"
    return "multi_output" if len(outs) > 1 else "loop"


def fusion(graph: Graph) -> Graph:
    """`graph` with its nodes grouped into `fusion` nodes (kernels); refusals say why edges stay apart."""
    fuser = _Fuser(graph)
    fuser.run()
    fuser.refusals()
    return fuser.build()
