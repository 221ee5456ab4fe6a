"""Graphviz DOT for a graph: one box per node showing the op, its params, output types and the
user's line; inputs, consts and outputs as ovals. Annotated stages (autodiff) color nodes by role;
with a memory plan each node also shows its values' buffer classes and sizes and what it frees."""

from __future__ import annotations

from collections.abc import Mapping

from ember.tracer.ir import Graph, Literal, Namer, Var, format_param

ROLE_COLORS = {
    "active": "#f8cecc",    # forward values that depend on a differentiated input
    "inactive": "#eeeeee",  # forward values that do not: they get no cotangent
    "backward": "#dae8fc",  # cotangent computations
}


def _esc(s: str) -> str:
    return s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _short_params(node) -> str:
    parts = []
    for k, v in node.params.items():
        if isinstance(v, Graph):
            text = f"<graph: {len(v.nodes)} nodes>"
        else:
            text = format_param(v)
        if len(text) > 40:
            text = text[:37] + "..."
        parts.append(f"{k}={text}")
    return "\n".join(parts)


def graph_to_dot(graph: Graph, name: str = "graph", annotations: Mapping | None = None, plan=None) -> str:
    names = Namer()
    lines = [f'digraph "{_esc(name)}" {{', "  rankdir=TB;",
             '  node [shape=box, style="rounded,filled", fillcolor=white, fontname="monospace", fontsize=10];',
             '  edge [fontname="monospace", fontsize=9, color="#555555"];']
    where: dict[Var, str] = {}
    # Consts first, then inputs: the order the text rendering names them in, so names agree.
    for i, v in enumerate(graph.consts):
        where[v] = f"const{i}"
        lines.append(f'  const{i} [shape=oval, fillcolor="#fff2cc", label="{_esc(names.typed(v))}\\nconst"];')
    for i, v in enumerate(graph.inputs):
        where[v] = f"in{i}"
        lines.append(f'  in{i} [shape=oval, fillcolor="#d5e8d4", label="{_esc(names.typed(v))}\\ninput {i}"];')
    for j, node in enumerate(graph.nodes):
        nid = f"n{j}"
        for v in node.outputs:
            where[v] = nid
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
        if plan is not None:
            label.append(" ".join(f"{plan.buffer_class[v]} {plan.nbytes[v]}B" for v in node.outputs))
            freed = plan.frees[j]
            if freed:
                label.append("frees " + " ".join(names(v) for v in freed))
        role = (annotations or {}).get(node)
        color = ROLE_COLORS.get(role, "white")
        role_text = f"\\n[{role}]" if role else ""
        lines.append(f'  {nid} [fillcolor="{color}", label="{_esc(chr(10).join(label))}{role_text}"];')
        for a in node.inputs:
            if isinstance(a, Var):
                lines.append(f'  {where[a]} -> {nid} [label="{_esc(names(a))}"];')
    for i, v in enumerate(graph.outputs):
        lines.append(f'  out{i} [shape=oval, fillcolor="#e1d5e7", label="output {i}\\n'
                     f'{_esc(v.aval.str_short())}"];')
        if isinstance(v, Var):
            lines.append(f'  {where[v]} -> out{i} [label="{_esc(names(v))}"];')
    if annotations:
        lines.append('  subgraph cluster_legend { label="legend"; fontname="monospace"; fontsize=9;')
        for role, color in ROLE_COLORS.items():
            lines.append(f'    legend_{role} [fillcolor="{color}", label="{role}"];')
        lines.append("  }")
    lines.append("}")
    return "\n".join(lines) + "\n"
