"""Tracing and the IR: avals, Tracer, trace -> Graph, the primitives and their rule tables."""

from ember.tracer import prims  # noqa: F401  (registers every primitive)
from ember.tracer.aval import ShapedArray
from ember.tracer.ir import Graph, Literal, Node, Params, Var
from ember.tracer.primitive import Primitive, primitives
from ember.tracer.trace import Tracer, eval_graph, is_tracing, trace_flat

__all__ = ["ShapedArray", "Graph", "Literal", "Node", "Params", "Var", "Primitive", "primitives", "Tracer",
           "eval_graph", "is_tracing", "trace_flat", "prims"]
