"""The implementations a workload is run on, behind one interface: NumPy (hand-written), Ember on each
backend, JAX (`jax.jit`), PyTorch eager and `torch.func`.

A workload writes its model once against `Ops` (the handful of array functions it needs) and builds each
implementation with `framework.impl(make, args)`, where `make(framework)` returns the function to run (for
example `fw.grad(loss, argnums=(0, 1))`). The framework converts the arguments to its arrays outside the
timing, jits the function where it compiles, and blocks on asynchronous results.

Compile time: every row reports the first call minus the steady-state median (the first call of a jitted
function traces, optimizes and compiles). The timed call is the user-facing one (`ember.jit(f)(*args)`,
`jax.jit(f)(*args)`), argument checks and cache lookup included.
"""

from __future__ import annotations

import tracemalloc
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from benchmarks.harness import Impl, Prepared, fmt_time
from benchmarks.peers import Peer
from ember.tree import tree_leaves, tree_map, tree_structure, tree_unflatten


@dataclass(frozen=True)
class Ops:
    """The array functions the workloads are written in, for one framework."""

    sum: Callable           # sum(x, axis=None)
    sqrt: Callable
    exp: Callable
    tanh: Callable
    einsum: Callable
    dot: Callable           # 1-d dot product
    softmax: Callable       # softmax(x, axis)
    zeros: Callable         # zeros(shape, like): zeros with like's dtype
    lax: Any = None         # the framework's lax (control flow: scan, fori_loop, while_loop), None if it has none


@dataclass(frozen=True)
class Loop:
    """Run the compiled single-sample function once per sample of args[arg] (a Python loop, as users write).

    Samples are split outside the timing. A loop slower than Settings.slow_call_s is timed on its first
    `subset` samples and scaled to the full count (the row says so)."""

    arg: int
    subset: int = 32


def tree_rebuild(tree: Any, leaves: Iterator) -> Any:
    """`tree`'s structure with its leaves taken, in order, from `leaves`."""
    structure = tree_structure(tree)
    return tree_unflatten(structure, [next(leaves) for _ in range(structure.num_leaves)])


def tracemalloc_peak(run: Callable[[], Any]) -> int:
    """Peak bytes traced by tracemalloc during one call (NumPy reports its array buffers to it)."""
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        base = tracemalloc.get_traced_memory()[0]
        out = run()
        peak = tracemalloc.get_traced_memory()[1] - base
        del out
        return peak
    finally:
        tracemalloc.stop()


class Framework:
    """One column-of-rows in the table: how to convert arrays, differentiate, batch, jit and time."""

    name: str = ""
    kind: str = ""          # numpy | ember | jax | torch (the table's framework column and the ratio keys)
    ops: Ops
    has_vmap: bool = True
    transforms_only: bool = False   # adds nothing to a forward-only case (torch.func runs eager torch there)

    def asarray(self, x: Any) -> Any:
        """A NumPy array (or scalar) as this framework's array; done once, outside the timing."""
        return x

    def grad(self, fn: Callable, argnums: int | Sequence[int] = 0) -> Callable:
        """The framework's gradient transform of scalar `fn`."""
        raise NotImplementedError(f"{self.name} has no grad")

    def vmap(self, fn: Callable, in_axes: Any = 0) -> Callable:
        """The framework's batching transform."""
        raise NotImplementedError(f"{self.name} has no vmap")

    def jit(self, fn: Callable) -> Callable:
        """The framework's compiler (identity for eager frameworks)."""
        return fn

    def block(self, out: Any) -> Any:
        """Wait for asynchronously computed results (JAX), so the timing covers the work."""
        return out

    def memory(self, jitted: Callable, args: tuple, run: Callable[[], Any]) -> tuple[Callable | None, str]:
        """(callable giving one call's peak bytes, or None and the reason shown instead)."""
        return None, ""

    def prepare(self, make: Callable[[Framework], Callable], args: tuple, loop: Loop | None = None,
                memory: bool = False, probe: Callable[[Callable], None] | None = None) -> Prepared:
        """Build, jit and bind the function; the harness then calls, checks and times `run`.

        `probe(call)`, if given, runs extra checks with `call(*numpy_args)` before any timing."""
        jitted = self.jit(make(self))
        if probe is not None:
            probe(lambda *a: self.block(jitted(*tree_map(self.asarray, a))))
        if loop is None:
            native = tree_map(self.asarray, args)

            def run() -> Any:
                return self.block(jitted(*native))

            mem, note = self.memory(jitted, native, run) if memory else (None, "")
            return Prepared(run, memory=mem, memory_note=note)
        batch = args[loop.arg]
        calls = [tree_map(self.asarray, tuple(args[:loop.arg]) + (batch[k],) + tuple(args[loop.arg + 1:]))
                 for k in range(len(batch))]

        def looped(m: int) -> Callable[[], list]:
            return lambda: self.block([jitted(*a) for a in calls[:m]])

        n, m = len(calls), min(loop.subset, len(calls))
        return Prepared(looped(n), subset=(looped(m), n / m, f"loop timed on {m} of {n} samples, scaled x{n / m:g}"))

    def impl(self, make: Callable[[Framework], Callable], args: tuple, *, suffix: str = "", loop: Loop | None = None,
             memory: bool = False, probe: Callable[[Callable], None] | None = None, baseline: bool = False) -> Impl:
        """A table row running `make(self)(*args)` (or a loop of it)."""
        return Impl(self.name + suffix, self.kind, lambda: self.prepare(make, args, loop, memory, probe),
                    baseline=baseline)


class Unavailable(Framework):
    """A peer that is absent or disabled: its rows carry the reason instead of timings."""

    def __init__(self, like: type[Framework], kind: str, status: str):
        self.name, self.kind, self.status = like.name, kind, status
        self.has_vmap, self.transforms_only = like.has_vmap, like.transforms_only

    def impl(self, make: Callable[[Framework], Callable] | None, args: tuple, *, suffix: str = "",
             loop: Loop | None = None, memory: bool = False, probe: Callable[[Callable], None] | None = None,
             baseline: bool = False) -> Impl:
        """A row that carries the peer's status instead of timings."""
        return Impl(self.name + suffix, self.kind, status=self.status)


class NumpyHand(Framework):
    """Hand-written NumPy forward and backward passes: the baseline every ratio is relative to."""

    name, kind = "numpy (hand-written)", "numpy"
    has_vmap = False

    def memory(self, jitted: Callable, args: tuple, run: Callable[[], Any]) -> tuple[Callable | None, str]:
        """tracemalloc's peak during one call."""
        return (lambda: tracemalloc_peak(run)), ""

    def impl(self, make: Callable[[Framework], Callable], args: tuple, *, suffix: str = "", loop: Loop | None = None,
             memory: bool = False, probe: Callable[[Callable], None] | None = None, baseline: bool = True) -> Impl:
        """A baseline row (hand-written code is the reference every ratio is relative to)."""
        return super().impl(make, args, suffix=suffix, loop=loop, memory=memory, probe=probe, baseline=baseline)


class Ember(Framework):
    """`ember.jit` on one backend; grad and vmap are Ember's transforms."""

    kind = "ember"

    def __init__(self, backend: str):
        import ember
        import ember.lax
        import ember.nn
        import ember.numpy as enp

        self.ember, self.backend, self.name = ember, backend, f"ember[{backend}]"
        self.ops = Ops(sum=enp.sum, sqrt=enp.sqrt, exp=enp.exp, tanh=enp.tanh, einsum=enp.einsum, dot=enp.dot,
                       softmax=lambda x, axis: ember.nn.softmax(x, axis=axis),
                       zeros=lambda shape, like: enp.zeros(shape, dtype=like.dtype), lax=ember.lax)

    def grad(self, fn: Callable, argnums: int | Sequence[int] = 0) -> Callable:
        """ember.grad."""
        return self.ember.grad(fn, argnums=argnums)

    def vmap(self, fn: Callable, in_axes: Any = 0) -> Callable:
        """ember.vmap."""
        return self.ember.vmap(fn, in_axes=in_axes)

    def jit(self, fn: Callable) -> Callable:
        """ember.jit on this framework's backend."""
        return self.ember.jit(fn, backend=self.backend)

    def prepare(self, make: Callable[[Framework], Callable], args: tuple, loop: Loop | None = None,
                memory: bool = False, probe: Callable[[Callable], None] | None = None) -> Prepared:
        """As every framework, plus (after the first call stored the code on disk) the compile step of
        the same function lowered again, which the disk cache serves: a new process pays that."""
        prepared = super().prepare(make, args, loop, memory, probe)
        if loop is None and self.backend != "numpy":  # the numpy backend keeps no compiled code on disk
            def reload() -> str:
                low = self.ember.jit(make(self), backend=self.backend).lower(*tree_map(self.asarray, args))
                low.compile()
                t = low.timings()
                return f"disk-cache reload: compile step {fmt_time(t.compile)}" if t.from_cache else ""

            prepared.after_first = reload
        return prepared

    def lower(self, fn: Callable, args: tuple, optimize: bool = True) -> Any:
        """`ember.jit(fn, optimize=...).lower(*args)` on this backend: the stages and the memory plan."""
        return self.ember.jit(fn, backend=self.backend, optimize=optimize).lower(*args)

    def memory(self, jitted: Callable, args: tuple, run: Callable[[], Any]) -> tuple[Callable | None, str]:
        """Outputs + peak intermediates of the memory plan (like JAX's output + temp bytes)."""
        def peak() -> int:
            report = jitted.lower(*args).memory()
            return int(report.peak_bytes + report.output_bytes)

        return peak, ""


class Jax(Framework):
    """`jax.jit` on the CPU (float64 enabled for the float64 workloads); results are blocked on."""

    name, kind = "jax.jit", "jax"

    def __init__(self, jax_module: Any):
        import jax.numpy as jnp

        self.jax, self.jnp = jax_module, jnp
        self.ops = Ops(sum=jnp.sum, sqrt=jnp.sqrt, exp=jnp.exp, tanh=jnp.tanh, einsum=jnp.einsum, dot=jnp.dot,
                       softmax=lambda x, axis: jax_module.nn.softmax(x, axis=axis),
                       zeros=lambda shape, like: jnp.zeros(shape, dtype=like.dtype), lax=jax_module.lax)

    def asarray(self, x: Any) -> Any:
        """A committed device array (passing NumPy arrays would add a transfer to every call)."""
        return self.jax.device_put(np.asarray(x))

    def grad(self, fn: Callable, argnums: int | Sequence[int] = 0) -> Callable:
        """jax.grad."""
        return self.jax.grad(fn, argnums=argnums)

    def vmap(self, fn: Callable, in_axes: Any = 0) -> Callable:
        """jax.vmap."""
        return self.jax.vmap(fn, in_axes=in_axes)

    def jit(self, fn: Callable) -> Callable:
        """jax.jit."""
        return self.jax.jit(fn)

    def block(self, out: Any) -> Any:
        """jax.block_until_ready."""
        return self.jax.block_until_ready(out)

    def memory_analysis(self, fn: Callable, args: tuple) -> Any:
        """`jax.jit(fn).lower(*args).compile().memory_analysis()`: XLA's buffer assignment, by kind."""
        return self.jax.jit(fn).lower(*args).compile().memory_analysis()

    def memory(self, jitted: Callable, args: tuple, run: Callable[[], Any]) -> tuple[Callable | None, str]:
        """Output + temp bytes of the compiled executable's memory analysis (outputs aliasing donated
        inputs are not new memory)."""
        def peak() -> int:
            m = jitted.lower(*args).compile().memory_analysis()
            return int(m.output_size_in_bytes + m.temp_size_in_bytes - m.alias_size_in_bytes)

        return peak, ""


def _torch_ops(torch: Any) -> Ops:
    return Ops(sum=lambda x, axis=None: torch.sum(x) if axis is None else torch.sum(x, dim=axis),
               sqrt=torch.sqrt, exp=torch.exp, tanh=torch.tanh, einsum=torch.einsum, dot=torch.dot,
               softmax=lambda x, axis: torch.softmax(x, dim=axis),
               zeros=lambda shape, like: torch.zeros(shape, dtype=like.dtype))


class TorchEager(Framework):
    """PyTorch eager mode; gradients with torch.autograd.grad on fresh leaf tensors each call."""

    name, kind = "torch eager", "torch"
    has_vmap = False

    def __init__(self, torch_module: Any):
        self.torch = torch_module
        self.ops = _torch_ops(torch_module)

    def asarray(self, x: Any) -> Any:
        """A CPU tensor sharing a private copy of the data."""
        return self.torch.from_numpy(np.array(x))

    def grad(self, fn: Callable, argnums: int | Sequence[int] = 0) -> Callable:
        """Gradient by torch.autograd.grad, with fresh leaf tensors (requires_grad) each call."""
        torch = self.torch
        nums = (argnums,) if isinstance(argnums, int) else tuple(argnums)

        def g(*args: Any) -> Any:
            args = list(args)
            for i in nums:
                args[i] = tree_map(lambda t: t.detach().requires_grad_(True), args[i])
            leaves = [leaf for i in nums for leaf in tree_leaves(args[i])]
            grads = iter(torch.autograd.grad(fn(*args), leaves))
            per_arg = [tree_rebuild(args[i], grads) for i in nums]
            return per_arg[0] if isinstance(argnums, int) else tuple(per_arg)

        return g

    def memory(self, jitted: Callable, args: tuple, run: Callable[[], Any]) -> tuple[Callable | None, str]:
        """PyTorch has no CPU allocator statistics."""
        return None, "n/a (no CPU allocator stats)"


class TorchFunc(TorchEager):
    """PyTorch's function transforms: torch.func.grad and torch.func.vmap (eager execution)."""

    name = "torch.func"
    has_vmap = True
    transforms_only = True

    def grad(self, fn: Callable, argnums: int | Sequence[int] = 0) -> Callable:
        """torch.func.grad."""
        return self.torch.func.grad(fn, argnums=argnums)

    def vmap(self, fn: Callable, in_axes: Any = 0) -> Callable:
        """torch.func.vmap."""
        return self.torch.func.vmap(fn, in_dims=in_axes)


def build(backends: Sequence[str], peers: dict[str, Peer]) -> list[Framework]:
    """The frameworks of one run, in table order: baseline, Ember backends, JAX, PyTorch eager, torch.func."""
    fws: list[Framework] = [NumpyHand()]
    fws += [Ember(b) for b in backends]
    jax, torch = peers["jax"], peers["torch"]
    fws.append(Jax(jax.module) if jax.available else Unavailable(Jax, "jax", jax.status))
    if torch.available:
        fws += [TorchEager(torch.module), TorchFunc(torch.module)]
    else:
        fws += [Unavailable(TorchEager, "torch", torch.status), Unavailable(TorchFunc, "torch", torch.status)]
    return fws


@dataclass
class RunConfig:
    """What the workloads build their cases for: problem sizes (quick or full) and the frameworks."""

    quick: bool
    frameworks: list[Framework]

    @property
    def baseline(self) -> Framework:
        """The hand-written NumPy framework (always first)."""
        return self.frameworks[0]

    def peers_and_ember(self, *, forward_only: bool = False, vmap: bool = False) -> list[Framework]:
        """Every framework but the baseline that applies: no torch.func for forward passes, vmap where asked."""
        return [fw for fw in self.frameworks[1:]
                if not (forward_only and fw.transforms_only) and not (vmap and not fw.has_vmap)]
