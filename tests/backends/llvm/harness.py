"""Compile an IR module and call its functions on NumPy arrays: the test harness of the renderer
modules (mathlib, scalar, loops, dot, indexing), independent of the backend's own entry."""

from __future__ import annotations

import ctypes
from collections.abc import Mapping

import llvmlite.binding as llvm
import numpy as np
from llvmlite import ir

from ember.backends.llvm import pool

_ready = False


def _init() -> None:
    global _ready
    if not _ready:
        llvm.initialize_native_target()
        llvm.initialize_native_asmprinter()
        _ready = True


def new_module(name: str = "test") -> ir.Module:
    _init()
    m = ir.Module(name)
    m.triple = llvm.get_process_triple()
    return m


class Compiled:
    """An MCJIT engine holding one optimized module (kept alive with this object)."""

    def __init__(self, module: ir.Module | str, symbols: Mapping[str, int] = (), opt: int = 3):
        _init()
        for name, addr in {**pool.symbols(), **dict(symbols)}.items():  # large loops run on the thread pool
            llvm.add_symbol(name, addr)
        self.ir = str(module)
        mod = llvm.parse_assembly(self.ir)
        mod.verify()
        target = llvm.Target.from_triple(llvm.get_process_triple())
        # one TargetMachine per engine: MCJIT takes ownership of it
        tm = target.create_target_machine(cpu=llvm.get_host_cpu_name(), features=llvm.get_host_cpu_features().flatten(),
                                          opt=opt, jit=True)
        pto = llvm.create_pipeline_tuning_options(speed_level=opt)
        pto.loop_vectorization = True
        pto.slp_vectorization = True
        pb = llvm.create_pass_builder(tm, pto)
        pb.getModulePassManager().run(mod, pb)
        self.optimized_ir = str(mod)
        self.engine = llvm.create_mcjit_compiler(mod, tm)
        self.engine.finalize_object()

    def address(self, name: str) -> int:
        return self.engine.get_function_address(name)

    def call(self, name: str, *arrays: np.ndarray, restype=None) -> object:
        """Call `name(ptr, ptr, ...)` with the data pointers of `arrays` (C-contiguous)."""
        for a in arrays:
            assert a.flags.c_contiguous, "the harness passes data pointers of C-contiguous arrays"
        fn = ctypes.CFUNCTYPE(restype, *([ctypes.c_void_p] * len(arrays)))(self.address(name))
        return fn(*(a.ctypes.data for a in arrays))


def pointer_function(module: ir.Module, name: str, n: int,
                     ret: ir.Type | None = None) -> tuple[ir.Function, ir.IRBuilder]:
    """`define <ret> @name(ptr, ... n times)` with a builder at its entry block."""
    fn = ir.Function(module, ir.FunctionType(ret or ir.VoidType(), [ir.PointerType()] * n), name)
    return fn, ir.IRBuilder(fn.append_basic_block("entry"))
