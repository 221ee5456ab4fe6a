"""The llvm backend object the registry loads: `compile(graph, plan)` -> LLVMExecutable."""

from __future__ import annotations

from ember.backends.llvm import entry, jit
from ember.backends.llvm.executable import LLVMExecutable, check_layout
from ember.passes.memory import Plan
from ember.tracer.ir import Graph


class LLVMBackend:
    name = "llvm"

    def __init__(self):
        check_layout()
        jit.target()  # LLVM's one-time setup, when the backend loads
        entry.code_signature_setup()

    def compile(self, graph: Graph, plan: Plan) -> LLVMExecutable:
        return LLVMExecutable(graph, plan)


BACKEND = LLVMBackend()
