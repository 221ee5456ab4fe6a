"""`Explanation`, the report `Lowered.explain()` returns: what was fused and written in place, then
every refusal the passes recorded (ember/passes/explain.py), grouped by pass, each node named as
`lowered.text()` names it."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

from ember.passes.explain import Refusal
from ember.passes.pipeline import PASSES
from ember.passes.stages import Stage
from ember.tracer.ir import Graph, Node, Var
from ember.viz.names import GraphNames, fusion_body

# What a pass's refusals are called in the report; other passes get "declined by <pass>".
HEADINGS = {"fusion": "not fused", "inplace": "not in place"}
GRAPH_PASSES = tuple(name for name, _ in PASSES)  # the optional passes recorded as stages


def compact_lines(locs: Iterable[str | None]) -> str:
    """User lines, each file named once with its lines sorted: `model.py:3,4 other.py:9`."""
    by_file: dict[str, set[int]] = {}
    for loc in locs:
        if not loc:
            continue
        path, _, line = loc.rpartition(":")
        lines = by_file.setdefault(path if line.isdigit() else loc, set())
        if line.isdigit():
            lines.add(int(line))
    return " ".join(f"{p}:{','.join(map(str, sorted(ls)))}" if ls else p for p, ls in by_file.items())


def count_prims(nodes: Iterable[Node]) -> str:
    """The prims of a kernel in first-seen order, repeats counted: `dot_general, add, 3 mul, tanh`."""
    counts: dict[str, int] = {}
    for n in nodes:
        counts[n.prim.name] = counts.get(n.prim.name, 0) + 1
    return ", ".join(f"{k} {p}" if k > 1 else p for p, k in counts.items())


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'s' * (n != 1)}"


def _table(rows: list[tuple[str, ...]], indent: str = "  ", widest: int = 48) -> list[str]:
    """Rows as aligned columns (the last column free); a column wider than `widest` is not padded past it."""
    if not rows:
        return []
    widths = [min(widest, max(len(r[k]) for r in rows)) for k in range(len(rows[0]) - 1)]
    return [indent + "  ".join([c.ljust(w) for c, w in zip(r, widths)] + [r[-1]]).rstrip() for r in rows]


@dataclass(repr=False)
class Explanation:
    """Why the optimizer did what it did for one lowering: the refusals its passes recorded (an edge
    not fused, a value not written in place, each with its rule and the user's line) and, for
    context, the fusions and in-place writes it made. `str()` is the report a user reads."""

    refusals: list[Refusal]
    stages: Sequence[Stage] = ()
    name: str = "function"
    disabled: tuple[str, ...] = ()

    @classmethod
    def of(cls, stages: Sequence[Stage], name: str = "function", disabled: Iterable[str] = ()) -> Explanation:
        """The explanation of a lowering from its recorded stages (their refusals, in pipeline order)."""
        return cls([r for s in stages for r in s.refusals], list(stages), name, tuple(disabled))

    def by_rule(self, rule: str) -> list[Refusal]:
        return [r for r in self.refusals if r.rule == rule]

    def by_pass(self, pass_name: str) -> list[Refusal]:
        return [r for r in self.refusals if r.pass_name == pass_name]

    def __iter__(self) -> Iterator[Refusal]:
        return iter(self.refusals)

    def __len__(self) -> int:
        return len(self.refusals)

    def __str__(self) -> str:
        return self.text()

    __repr__ = __str__  # `lowered.explain()` at a prompt shows the report

    def text(self) -> str:
        """The report: what ran, what was fused and written in place, then every refusal by pass."""
        return "\n".join(_Report(self).lines()) + "\n"


class _Report:
    """Renders an Explanation; names nodes as `lowered.text()` does (GraphNames per stage graph)."""

    def __init__(self, ex: Explanation):
        self.ex = ex
        self.final = ex.stages[-1] if ex.stages else None
        self._names: dict[int, GraphNames] = {}
        self.stage_of = {id(r): i for i, s in enumerate(ex.stages) for r in s.refusals}
        self.computations = Computations()
        self._final_by_number: dict[int, Node] | None = None

    def names(self, graph: Graph) -> GraphNames:
        found = self._names.get(id(graph))
        if found is None:
            found = self._names[id(graph)] = GraphNames(graph)
        return found

    def label(self, node: Node, stage_index: int | None) -> str:
        """`exp c` as named in the optimized graph (the node itself, or the node computing the same
        thing there, e.g. its copy in a fusion body), else as named in the nearest earlier stage that
        has it (that stage named after it), else the prim alone."""
        stages = list(self.ex.stages)
        if self.final is not None:
            found = self.names(self.final.graph).label(node) or self.optimized_copy(node, stages, stage_index)
            if found is not None:
                return found
        order = (stages[stage_index::-1] if stage_index is not None else []) + stages[::-1]
        for stage in order:
            found = self.names(stage.graph).label(node)
            if found is not None:
                return f"{found} (as in {stage.name!r})"
        return node.prim.name

    def optimized_copy(self, node: Node, stages: list[Stage], stage_index: int | None) -> str | None:
        """The label of the optimized graph's node that computes what `node` computed in the stage
        that has it (the refusal's stage or an earlier one)."""
        if self._final_by_number is None:
            numbers = self.computations.of(self.final.graph)
            self._final_by_number = {}
            for n, k in numbers.items():
                self._final_by_number.setdefault(k, n)
        for stage in (stages[stage_index::-1] if stage_index is not None else stages[::-1]):
            number = self.computations.of(stage.graph).get(node)
            if number is not None:
                copy = self._final_by_number.get(number)
                return self.names(self.final.graph).label(copy) if copy is not None else None
        return None

    # -- sections ------------------------------------------------------------------------------------
    def lines(self) -> list[str]:
        ex = self.ex
        out = [self.headline()]
        if self.optimized_nothing() and not ex.refusals:
            return out
        if self.final is not None:
            out += self.fused() + self.in_place()
        passes = list(dict.fromkeys([*HEADINGS, *(r.pass_name for r in ex.refusals)]))
        for p in passes:
            out += self.refused(p)
        return out

    def ran(self) -> list[str]:
        """The optional passes that ran: graph passes that recorded a stage, and in-place planning."""
        names = {s.name for s in self.ex.stages}
        ran = [p for p in GRAPH_PASSES if f"after {p}" in names]
        if "inplace" not in self.ex.disabled and self.plan_inplace() is not None:
            ran.append("inplace")
        return ran

    def plan_inplace(self):
        plan = self.final.plan if self.final is not None else None
        return getattr(plan, "inplace", None)

    def optimized_nothing(self) -> bool:
        return bool(self.ex.stages) and set(GRAPH_PASSES + ("inplace",)) <= set(self.ex.disabled)

    def headline(self) -> str:
        ex = self.ex
        if self.optimized_nothing():
            return (f"explain {ex.name}: no optimization ran (optimize=False): every node runs on its own and "
                    "every value has its own buffer, freed after its last use. Lower without optimize=False "
                    "to fuse kernels and write in place.")
        head = f"explain {ex.name}"
        if ex.stages:
            head += f": passes run: {', '.join(self.ran()) or 'none'}"
            if ex.disabled:
                head += f"; disabled: {', '.join(ex.disabled)}"
            head += ". Names are those of lowered.text()."
        return head

    def fused(self) -> list[str]:
        if "fusion" not in self.ran():
            return []
        names = self.names(self.final.graph)
        rows = []
        for node in self.final.graph.nodes:
            body = fusion_body(node)
            if body is None:
                continue
            results = " ".join(names(v) for v in node.outputs)
            prims = count_prims(body.nodes)
            rows.append((f"{results} = {node.params['kind']}:", compact_lines(n.loc for n in body.nodes), prims))
        if not rows:
            return ["fused: nothing (no two nodes could share a kernel)"]
        nodes = sum(len(fusion_body(n).nodes) for n in self.final.graph.nodes if fusion_body(n) is not None)
        head = f"fused: {_plural(len(rows), 'kernel')} from {nodes} nodes (lowered.text() prints each body under it)"
        return [head] + _table(rows)

    def in_place(self) -> list[str]:
        inplace = self.plan_inplace()
        if inplace is None or "inplace" not in self.ran():
            return []
        if not inplace:
            return ["in place: nothing written in place"]
        graph, plan = self.final.graph, self.final.plan
        names = self.names(graph)
        maker = {v: node for node in graph.nodes for v in node.outputs}
        rows, saved = [], 0
        for out, operand in inplace.items():
            node = maker.get(out)
            saved += plan.nbytes.get(out, 0)
            what = f"{node.prim.name} {names(out)}" if node is not None else names(out)
            into = f"writes into {names(operand)}'s buffer"
            if plan.buffer_class.get(operand) == "donated":
                into += " (a donated input)"
            rows.append((what, into, (node.loc or "") if node else ""))
        head = f"in place: {_plural(len(rows), 'value')} written into the buffer of an input that dies there"
        return [f"{head} ({saved} bytes not allocated)"] + _table(rows)

    def refused(self, pass_name: str) -> list[str]:
        heading = HEADINGS.get(pass_name, f"declined by {pass_name}")
        found = self.ex.by_pass(pass_name)
        if not found:
            if pass_name in self.ex.disabled:
                return [f"{heading}: {pass_name} is disabled"]
            if self.ex.stages and pass_name not in self.ran():
                return [f"{heading}: {pass_name} did not run"]
            return [f"{heading}: nothing refused"] if self.ex.stages else []
        rows = []
        for r in found:
            where = self.stage_of.get(id(r))
            nodes = " -> ".join(self.label(n, where) for n in r.nodes) or "-"
            rows.append((nodes, r.loc or "(no line)", f"{r.message} [{r.rule}]"))
        what = {"fusion": "edge", "inplace": "node"}.get(pass_name, "refusal")
        return [f"{heading}: {_plural(len(found), what)}, each with its line, the reason and [rule]"] + _table(rows)


class Computations:
    """Numbers what each node computes (prim, params, operands' numbers; graph inputs by position), the
    same number in every graph, so a node a pass rebuilt (into a fusion body) is found in the result."""

    def __init__(self):
        self._ids: dict[tuple, int] = {}
        self._graphs: dict[int, dict[Node, int]] = {}

    def of(self, graph: Graph) -> dict[Node, int]:
        """The number of every node of `graph`, fusion bodies included (a fusion itself has none)."""
        found = self._graphs.get(id(graph))
        if found is None:
            found = self._graphs[id(graph)] = self._number(graph)
        return found

    def _number(self, graph: Graph) -> dict[Node, int]:
        value: dict[Var, object] = {v: ("input", i) for i, v in enumerate(graph.inputs)}
        value.update({v: ("const", i) for i, v in enumerate(graph.consts)})
        numbers: dict[Node, int] = {}

        def atom(a):
            return value.get(a, ("var", id(a))) if isinstance(a, Var) else ("literal", a.key)

        def visit(nodes):
            for node in nodes:
                body = fusion_body(node)
                if body is not None:
                    value.update((v, atom(a)) for v, a in zip(body.inputs, node.inputs))
                    visit(body.nodes)
                    value.update((r, atom(v)) for v, r in zip(body.outputs, node.outputs))
                    continue
                key = (node.prim.name, node.params, tuple(atom(a) for a in node.inputs))
                n = numbers[node] = self._ids.setdefault(key, len(self._ids))
                value.update((v, (n, k)) for k, v in enumerate(node.outputs))

        visit(graph.nodes)
        return numbers
