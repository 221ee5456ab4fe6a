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
        from ember.backends.cuda import runtime
        from ember.backends.cuda.prelude import DEVICE_PRELUDE

        program = build_program(graph, plan)
        source = DEVICE_PRELUDE + program.source()
        start = time.perf_counter()
        module = runtime.load_module(source)
        return CudaExecutable(graph, program, CupyDevice(module), source, time.perf_counter() - start)


class CudaHostBackend:
    name = "cuda-host"

    def compile(self, graph: Graph, plan: Plan) -> CudaExecutable:
        from ember.backends.cuda.host import HostModule

        program = build_program(graph, plan)
        source = program.source()
        module = HostModule(source, host_signatures(program.kernels.values()))
        return CudaExecutable(graph, program, HostDevice(module), source, module.compile_seconds,
                              module.from_cache)


def compile_many(graphs_and_plans, device: str = "cuda-host") -> list[CudaExecutable]:
    """Executables of many (graph, plan) pairs from one module (one compiler call, equal kernels once):
    how tests check hundreds of graphs within the suite's budget. `device`: "cuda-host" or "cuda"."""
    from ember.backends.cuda.program import link

    programs = [(g, build_program(g, plan)) for g, plan in graphs_and_plans]
    source = link(p for _, p in programs)
    start = time.perf_counter()
    if device == "cuda-host":
        from ember.backends.cuda.host import HostModule

        kernels = {k.name: k for _, p in programs for k in p.kernels.values()}
        module = HostModule(source, host_signatures(kernels.values()))
        make = HostDevice
    else:
        from ember.backends.cuda import runtime
        from ember.backends.cuda.prelude import DEVICE_PRELUDE

        source = DEVICE_PRELUDE + source
        module = runtime.load_module(source)
        make = CupyDevice
    seconds = time.perf_counter() - start
    return [CudaExecutable(g, p, make(module), source, seconds) for g, p in programs]


def host_signatures(kernels) -> list:
    """The host launchers' signatures of `kernels` (render.CudaKernel)."""
    from ember.backends.cuda.host import KernelSig

    return [KernelSig(k.name, tuple(t for t, _ in k.params)) for k in kernels]

