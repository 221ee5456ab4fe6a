"""The backend objects the registry loads: `cuda` (a GPU through CuPy) and `cuda-host` (the same CUDA
source compiled as host C++ and run on the CPU: how every kernel is checked where there is no GPU)."""

from __future__ import annotations

import time

from ember.backends.cuda.executable import CudaExecutable, CupyDevice, HostDevice
from ember.backends.cuda.program import build_program
from ember.passes.memory import Plan
from ember.tracer.ir import Graph


class CudaBackend:
    name = "cuda"

    def __init__(self):
        from ember.backends.cuda import runtime

        runtime.require_device()

    def compile(self, graph: Graph, plan: Plan) -> CudaExecutable:
        return compile_many([(graph, plan)], "cuda")[0]


class CudaHostBackend:
    name = "cuda-host"

    def compile(self, graph: Graph, plan: Plan) -> CudaExecutable:
        return compile_many([(graph, plan)], "cuda-host")[0]


def compile_many(graphs_and_plans, device: str = "cuda-host") -> list[CudaExecutable]:
    """Executables of (graph, plan) pairs from one module (one compiler call, equal kernels once): the
    backends compile one graph so, tests hundreds within the suite's budget. `device`: "cuda-host" or
    "cuda"."""
    from ember.backends.cuda.program import link

    programs = [(g, build_program(g, plan)) for g, plan in graphs_and_plans]
    source = link(p for _, p in programs)
    start = time.perf_counter()
    if device == "cuda-host":
        from ember.backends.cuda.host import HostModule

        kernels = {k.name: k for _, p in programs for k in p.kernels.values()}
        module = HostModule(source, host_signatures(kernels.values()))
        make, seconds, cached = HostDevice, module.compile_seconds, module.from_cache
    else:
        from ember.backends.cuda import runtime
        from ember.backends.cuda.prelude import DEVICE_PRELUDE

        source = DEVICE_PRELUDE + source
        module = runtime.load_module(source)
        make, seconds, cached = CupyDevice, time.perf_counter() - start, False
    return [CudaExecutable(g, p, make(module), source, seconds, cached) for g, p in programs]


def host_signatures(kernels) -> list:
    """The host launchers' signatures of `kernels` (render.CudaKernel)."""
    from ember.backends.cuda.host import KernelSig

    return [KernelSig(k.name, tuple(t for t, _ in k.params)) for k in kernels]
