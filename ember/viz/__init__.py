"""Renderings of graphs: jaxpr-like text, Graphviz DOT, SVG (through `dot`), stage dumps, a networkx view
(nxgraph.py), and the reports `Lowered.explain()` and `Lowered.memory()` return (explain.py, memory_report.py)."""

from ember.viz.dot import graph_to_dot
from ember.viz.dump import write_stages
from ember.viz.svg import GraphvizNotFoundError, dot_available, render_svg
from ember.viz.text import stage_text

__all__ = ["graph_to_dot", "write_stages", "GraphvizNotFoundError", "dot_available", "render_svg", "stage_text"]
