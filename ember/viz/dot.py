"""Graphviz DOT for a graph: one box per node showing the op, its params, output types and the
user's line; inputs, consts and outputs as ovals. Annotated stages (autodiff) color nodes by role;
with a memory plan each node also shows its values' buffer classes and sizes and what it frees.
A fusion is a cluster labeled with its kind: its operands enter through input ports, its body's
nodes sit inside, its results leave through output ports. A cond, while or scan is a cluster holding
its node and one nested cluster per body (each with its input and output ports; bodies nest again).
Values the plan writes in place are marked
on the edge that carries the overwritten operand (bold red, "in place")."""

from __future__ import annotations

from collections.abc import Mapping

from ember.tracer.ir import Graph, Literal, Namer, Node, Var, format_param
from ember.viz.names import GraphNames, control_bodies, fusion_body

ROLE_COLORS = {
    "active": "#f8cecc",    # forward values that depend on a differentiated input
    "inactive": "#eeeeee",  # forward values that do not: they get no cotangent
    "backward": "#dae8fc",  # cotangent computations
}
KIND_COLORS = {  # fusion clusters, by the rule that made them
    "loop": "#fff8e1",
    "reduction": "#e8f5e9",
    "multi_output": "#f3e5f5",
    "epilogue": "#e3f2fd",
}
INPLACE_STYLE = 'style=bold, color="#c62828", fontcolor="#c62828"'


def _esc(s: str) -> str:
    return s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _short_params(node) -> str:
    parts = []
    for k, v in node.params.items():
        if isinstance(v, Graph):
            text = f"<graph: {len(v.nodes)} nodes>"
        elif isinstance(v, tuple) and v and all(isinstance(g, Graph) for g in v):
            text = f"<{len(v)} graphs: {', '.join(str(len(g.nodes)) for g in v)} nodes>"
        else:
            text = format_param(v)
        if len(text) > 40:
            text = text[:37] + "..."
        parts.append(f"{k}={text}")
    return "\n".join(parts)


def graph_to_dot(graph: Graph, name: str = "graph", annotations: Mapping | None = None, plan=None) -> str:
    return _Dot(graph, annotations, plan).render(name)


class _Dot:
    """One rendering: the DOT id holding each value (`where`), the names and the in-place writes."""

    def __init__(self, graph: Graph, annotations: Mapping | None, plan):
        self.graph, self.annotations, self.plan = graph, annotations, plan
        self.names: Namer = GraphNames(graph)
        self.where: dict[Var, str] = {}
        self.clusters = 0
        maker = {v: node for node in graph.nodes for v in node.outputs}
        self.inplace: dict[Node, dict[Var, Var]] = {}  # node -> {overwritten operand: its result}
        for out, operand in (getattr(plan, "inplace", None) or {}).items():
            if out in maker:
                self.inplace.setdefault(maker[out], {})[operand] = out

    def render(self, name: str) -> str:
        g, names = self.graph, self.names
        lines = [f'digraph "{_esc(name)}" {{', "  rankdir=TB;", "  compound=true;",
                 '  node [shape=box, style="rounded,filled", fillcolor=white, fontname="monospace", fontsize=10];',
                 '  edge [fontname="monospace", fontsize=9, color="#555555"];']
        # Consts first, then inputs: the order the text rendering names them in, so names agree.
        for i, v in enumerate(g.consts):
            self.where[v] = f"const{i}"
            lines.append(f'  const{i} [shape=oval, fillcolor="#fff2cc", label="{_esc(names.typed(v))}\\nconst"];')
        for i, v in enumerate(g.inputs):
            self.where[v] = f"in{i}"
            lines.append(f'  in{i} [shape=oval, fillcolor="#d5e8d4", label="{_esc(names.typed(v))}\\ninput {i}"];')
        for j, node in enumerate(g.nodes):
            lines += self.node(node, f"n{j}", j, "  ")
        for i, v in enumerate(g.outputs):
            lines.append(f'  out{i} [shape=oval, fillcolor="#e1d5e7", label="output {i}\\n'
                         f'{_esc(v.aval.str_short())}"];')
            if isinstance(v, Var):
                lines.append(f'  {self.where[v]} -> out{i} [label="{_esc(names(v))}"];')
        lines += self.legend()
        lines.append("}")
        return "\n".join(lines) + "\n"

    def role(self, node: Node, nested: bool) -> str | None:
        if not self.annotations:
            return None
        return self.annotations.get(node, node.role) if nested else self.annotations.get(node)

    def value_plan(self, v: Var, node: Node) -> str:
        """The plan's view of one result: buffer class, bytes, buffer id, the operand it overwrites."""
        plan = self.plan
        text = f"{plan.buffer_class[v]} {plan.nbytes[v]}B"
        buffer = getattr(plan, "buffer", None) or {}
        if v in buffer:
            text += f" buf{buffer[v]}"
        into = [a for a, out in self.inplace.get(node, {}).items() if out is v]
        if into:
            text += f" in place of {self.names(into[0])}"
        return text

    def frees(self, step: int) -> list[str]:
        freed = self.plan.frees[step]
        return ["frees " + " ".join(self.names(v) for v in freed)] if freed else []

    def edge(self, a, target: str, written: Mapping[Var, Var]) -> list[str]:
        if not isinstance(a, Var):
            return []
        label = self.names(a)
        if a in written:
            return [f'  {self.where[a]} -> {target} [{INPLACE_STYLE}, label="{_esc(label)} (in place)"];']
        return [f'  {self.where[a]} -> {target} [label="{_esc(label)}"];']

    def node(self, node: Node, nid: str, step: int | None, pad: str, nested: bool = False) -> list[str]:
        """A plain node as one box (and its incoming edges); a fusion as a cluster."""
        if fusion_body(node) is not None:
            return self.fusion(node, nid, step, pad, nested)
        bodies = control_bodies(node)
        box = self.box(node, nid, step, pad if not bodies else pad + "  ", nested)
        return box if not bodies else self.control(node, nid, bodies, box, pad)

    def control(self, node: Node, nid: str, bodies, box: list[str], pad: str) -> list[str]:
        """A cluster around a control-flow node's box: one nested cluster per body, nodes inside."""
        self.clusters += 1
        lines = [f"{pad}subgraph cluster_{self.clusters} {{",
                 f'{pad}  label="{_esc(node.prim.name)}"; style="rounded,dashed"; fontname="monospace"; fontsize=10;']
        lines += [b for b in box if "->" not in b]
        for b, (title, body) in enumerate(bodies):
            self.clusters += 1
            inner = f"{pad}    "
            lines += [f"{pad}  subgraph cluster_{self.clusters} {{",
                      f'{inner}label="{_esc(title)}"; style="rounded,filled"; fillcolor="#f5f5f5"; '
                      'fontname="monospace"; fontsize=10;']
            for i, v in enumerate(body.inputs):
                port = f"{nid}_b{b}_in{i}"
                label = _esc(self.names.typed(v))
                lines.append(f'{inner}{port} [shape=invhouse, fillcolor="#ffffff", label="{label}"];')
                self.where[v] = port
            for k, sub in enumerate(body.nodes):
                lines += self.node(sub, f"{nid}_b{b}_{k}", None, inner, True)
            for i, v in enumerate(body.outputs):
                port = f"{nid}_b{b}_out{i}"
                lines.append(f'{inner}{port} [shape=house, fillcolor="#ffffff", label="out {i}"];')
                if isinstance(v, Var):
                    lines.append(f"{inner}{self.where[v]} -> {port};")
            lines.append(f"{pad}  }}")
        lines.append(f"{pad}}}")
        return lines + [pad + b.lstrip() for b in box if "->" in b]

    def box(self, node: Node, nid: str, step: int | None, pad: str, nested: bool) -> list[str]:
        """One node as a box, and its incoming edges."""
        names = self.names
        for v in node.outputs:
            self.where[v] = nid
        lits = [repr(a) for a in node.inputs if isinstance(a, Literal)]
        label = [node.prim.name]
        params = _short_params(node)
        if params:
            label.append(params)
        if lits:
            label.append("literals: " + " ".join(lits))
        label.append(" ".join(names.typed(v) for v in node.outputs))
        if node.loc:
            label.append(node.loc)
        if self.plan is not None and step is not None:
            label += [" ".join(self.value_plan(v, node) for v in node.outputs)] + self.frees(step)
        role = self.role(node, nested)
        color = ROLE_COLORS.get(role, "white")
        role_text = f"\\n[{role}]" if role else ""
        lines = [f'{pad}{nid} [fillcolor="{color}", label="{_esc(chr(10).join(label))}{role_text}"];']
        written = self.inplace.get(node, {}) if not nested else {}
        for a in node.inputs:
            lines += self.edge(a, nid, written)
        return lines

    def fusion(self, node: Node, nid: str, step: int | None, pad: str, nested: bool) -> list[str]:
        """A cluster labeled `fusion <results>: <kind>`: input ports, the body's nodes, output ports."""
        body, kind, names = fusion_body(node), node.params["kind"], self.names
        self.clusters += 1
        title = [f"fusion {' '.join(names(v) for v in node.outputs)}: {kind}"]
        if node.loc:
            title.append(node.loc)
        planned = self.plan is not None and step is not None
        if planned:
            title += self.frees(step)
        lines = [f"{pad}subgraph cluster_{self.clusters} {{",
                 f'{pad}  label="{_esc(chr(10).join(title))}"; style="rounded,filled"; '
                 f'fillcolor="{KIND_COLORS.get(kind, "#f5f5f5")}"; fontname="monospace"; fontsize=10;']
        edges = []
        written = self.inplace.get(node, {}) if not nested else {}
        for i, (v, a) in enumerate(zip(body.inputs, node.inputs)):
            port = f"{nid}_in{i}"
            lines.append(f'{pad}  {port} [shape=invhouse, fillcolor="#ffffff", label="{_esc(names(a))}"];')
            edges += self.edge(a, port, written)
            self.where[v] = port
        for k, inner in enumerate(body.nodes):
            lines += self.node(inner, f"{nid}_{k}", None, pad + "  ", True)
        for i, (v, r) in enumerate(zip(body.outputs, node.outputs)):
            port = f"{nid}_out{i}"
            label = names.typed(r) + (f"\n{self.value_plan(r, node)}" if planned else "")
            lines.append(f'{pad}  {port} [shape=house, fillcolor="#ffffff", label="{_esc(label)}"];')
            if isinstance(v, Var):
                lines.append(f'{pad}  {self.where[v]} -> {port};')
            self.where[r] = port
        lines.append(f"{pad}}}")
        return lines + [pad + e.lstrip() for e in edges]

    def legend(self) -> list[str]:
        items = []
        if self.annotations:
            items += [f'    legend_{role} [fillcolor="{color}", label="{role}"];'
                      for role, color in ROLE_COLORS.items()]
        if self.inplace:
            items += ['    legend_ip_a [label="x"]; legend_ip_b [label="y = f(x)"];',
                      f'    legend_ip_a -> legend_ip_b [{INPLACE_STYLE}, label="in place: y overwrites x"];']
        if not items:
            return []
        return ['  subgraph cluster_legend { label="legend"; fontname="monospace"; fontsize=9;', *items, "  }"]
