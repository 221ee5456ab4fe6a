"""`python -m benchmarks --backend cuda`: the seed workloads at GPU sizes, `ember.jit(..., backend="cuda")`
on CuPy arrays beside the same math written by hand with CuPy and `jax.jit` on the GPU; then the achieved
bandwidth of a large fused elementwise kernel and of a large sum as a fraction of the device's copy
bandwidth, and the launch overhead of a jitted call beside a bare `cupy.RawKernel` launch.

Every model is written once: the Ember and JAX functions from the CPU workloads' `Ops` models, the
hand-written twin against an array module `xp` (CuPy on the GPU, NumPy in the tests). Each result is
checked against the hand-written one before anything is timed. A workload or implementation that fails
becomes an error row; the run goes on. Without a GPU the command prints what is missing and exits 2.

Timing: a sample is `calls` back-to-back calls followed by one device synchronize (JAX: blocking on the
last result), timed on the host clock, so a call's launch cost and its kernels are both in it; the
implementations of a workload are sampled interleaved, in rotating order; the table gives medians.
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import os
import statistics
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from benchmarks.frameworks import Ember, Jax
from benchmarks.harness import fmt_time, log
from benchmarks.workloads import cosine, dense_bias_act, eam, per_sample
from ember.tree import tree_leaves, tree_map

# -- the workloads --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Workload:
    """One row of the table: the model for Ember and JAX (`model(framework)` gives the function to jit),
    its hand-written twin `hand(xp, *args)`, and its inputs at full and at tiny (test) size."""

    name: str
    group: str                                  # the command line's selector
    model: Callable[[Any], Callable]            # framework (benchmarks.frameworks.Ember / Jax) -> function
    hand: Callable[..., Any]                    # hand(xp, *args): the same math with array-module ops
    inputs: Callable[[dict], tuple]             # size -> NumPy arguments
    full: dict
    tiny: dict
    dtype: type = np.float32

    def size_text(self, size: dict) -> str:
        return ", ".join(f"{k}={v:,}" if isinstance(v, int) else f"{k}={v}" for k, v in size.items())


def eam_hand(xp: Any, x: Any) -> Any:
    """The seed's `deam!`: -3 exp(-3(x+1)) (2 rho + 3 rho^2 + rho^3), rho = sum(exp(-3(x+1)))."""
    e = xp.exp(-3.0 * (x + 1.0))
    rho = xp.sum(e)
    return (-3.0 * e) * (2.0 * rho + 3.0 * rho**2 + rho**3)


def random_vector(n: int, dtype: type, seed: int) -> np.ndarray:
    """n uniform [0, 1) values of `dtype`, drawn in that dtype (10**8 of them take a fraction of a second)."""
    return np.random.default_rng(seed).random(n, dtype=dtype)


def eam_inputs(dtype: type) -> Callable[[dict], tuple]:
    return lambda size: (random_vector(size["n"], dtype, 1),)


def dense_hand(xp: Any, w: Any, x: Any, b: Any) -> tuple:
    """d/d(w, x, b) of sum(tanh(w @ x + b[:, None])^2): dz = 2 y (1 - y^2); dw = dz x^T, dx = w^T dz."""
    y = xp.tanh(w @ x + b[:, None])
    gz = 2.0 * y * (1.0 - y * y)
    return gz @ x.T, w.T @ gz, xp.sum(gz, axis=1)


def per_sample_hand(xp: Any, params: tuple, xs: Any) -> tuple:
    """Per-sample gradients of sum(mlp(x)) (tanh between layers, w stored (in, out)): the backward pass
    on the whole batch, each weight gradient an outer product per sample."""
    n_layers = len(params) // 2
    hs = [xs]
    for i in range(n_layers):
        z = hs[-1] @ params[2 * i] + params[2 * i + 1]
        hs.append(xp.tanh(z) if i < n_layers - 1 else z)
    g = xp.ones_like(hs[-1])
    grads: list = []
    for i in reversed(range(n_layers)):
        if i < n_layers - 1:
            g = g * (1.0 - hs[i + 1] * hs[i + 1])
        grads[:0] = [hs[i][:, :, None] * g[:, None, :], g]
        g = g @ params[2 * i].T
    return tuple(grads)


def per_sample_inputs(size: dict) -> tuple:
    xs = np.random.default_rng(1).standard_normal((size["batch"], per_sample.SIZES[0])).astype(np.float32)
    return per_sample.init_params(), xs


def per_sample_model(fw: Any) -> Callable:
    def loss(p: tuple, x: Any) -> Any:
        return fw.ops.sum(per_sample.mlp(fw.ops, p, x, "tanh"))

    return fw.vmap(fw.grad(loss), in_axes=(None, 0))


def cosine_hand(xp: Any, a: Any, b: Any, weights: Any) -> tuple:
    """d/d(a, b) of sum(P * weights), P = softmax over N of the cosines (see workloads/cosine.py)."""
    an = xp.sqrt(xp.sum(a * a, axis=-1, keepdims=True))
    bn = xp.sqrt(xp.sum(b * b, axis=-1, keepdims=True))
    ah, bh = a / an, b / bn
    s = xp.matmul(bh, ah.transpose(0, 2, 1))
    e = xp.exp(s - xp.max(s, axis=1, keepdims=True))
    p = e / xp.sum(e, axis=1, keepdims=True)
    gs = p * (weights - xp.sum(p * weights, axis=1, keepdims=True))
    g_bh = xp.matmul(gs, ah)
    g_ah = xp.matmul(gs.transpose(0, 2, 1), bh)
    g_a = (g_ah - ah * xp.sum(g_ah * ah, axis=-1, keepdims=True)) / an
    g_b = (g_bh - bh * xp.sum(g_bh * bh, axis=-1, keepdims=True)) / bn
    return g_a, g_b


def cosine_model(fw: Any) -> Callable:
    def loss(a: Any, b: Any, weights: Any) -> Any:
        return fw.ops.sum(cosine.cosine_vectorized(fw.ops, a, b) * weights)

    return fw.grad(loss, argnums=(0, 1))


COSINE_SHAPE = dict(R=4, N=16, W=64)

WORKLOADS = [
    Workload("eam grad, float64", "eam", lambda fw: fw.grad(lambda x: eam.eam(fw.ops, x)), eam_hand,
             eam_inputs(np.float64), dict(n=10**8), dict(n=1000), np.float64),
    Workload("eam grad, float32", "eam", lambda fw: fw.grad(lambda x: eam.eam(fw.ops, x)), eam_hand,
             eam_inputs(np.float32), dict(n=10**8), dict(n=1000)),
    Workload("dense+bias+tanh grad w, x, b", "dense_bias_act",
             lambda fw: fw.grad(lambda w, x, b: dense_bias_act.loss(fw.ops, w, x, b), argnums=(0, 1, 2)),
             dense_hand, lambda size: dense_bias_act.inputs(size["n"]), dict(n=4096), dict(n=16)),
    Workload("per-sample grads (vmap), MLP 10-32-32-10, tanh", "per_sample", per_sample_model, per_sample_hand,
             per_sample_inputs, dict(batch=65536), dict(batch=8)),
    Workload("cosine-softmax grad of weighted sum", "cosine", cosine_model, cosine_hand,
             lambda size: cosine.inputs(dict(size, **COSINE_SHAPE)), dict(B=4096), dict(B=2)),
]

# The bandwidth and launch-overhead kernels: Ember functions with hand-written twins like the workloads.
ELEMENTWISE_A, ELEMENTWISE_B = 0.5, 0.25


def one_vector(dtype: type = np.float32) -> Callable[[dict], tuple]:
    return lambda size: (random_vector(size["n"], dtype, 2),)


ELEMENTWISE = Workload("fused elementwise tanh(a*x+b)", "bandwidth",
                       lambda fw: lambda x: fw.ops.tanh(ELEMENTWISE_A * x + ELEMENTWISE_B),
                       lambda xp, x: xp.tanh(ELEMENTWISE_A * x + ELEMENTWISE_B), one_vector(),
                       dict(n=2**27), dict(n=5000))
REDUCTION = Workload("sum reduction", "bandwidth", lambda fw: lambda x: fw.ops.sum(x),
                     lambda xp, x: xp.sum(x), one_vector(), dict(n=2**28), dict(n=5000))
LAUNCH = Workload("x + 1, one element", "dispatch", lambda fw: lambda x: x + 1.0, lambda xp, x: x + 1.0,
                  one_vector(), dict(n=1), dict(n=1))
KERNELS = [ELEMENTWISE, REDUCTION, LAUNCH]
GROUPS = ("eam", "dense_bias_act", "per_sample", "cosine", "bandwidth", "dispatch")

TOLERANCE = {np.dtype(np.float32): 5e-4, np.dtype(np.float64): 1e-9}   # of the hand result's largest magnitude


# -- devices, peers, timing -------------------------------------------------------------------------------


@dataclass
class Device:
    """Where the run happens: the array module, host-to-device copy, synchronize, the Ember backend,
    and (on a GPU) a bare launch of a trivial kernel and a device-to-device copy for the floors."""

    name: str
    xp: Any
    backend: str
    asarray: Callable[[Any], Any]
    sync: Callable[[], None]
    trivial_launch: Callable[[Any], Callable[[], None]] | None = None   # (1-element array) -> launch it
    free: Callable[[], None] = lambda: None


TRIVIAL_KERNEL = 'extern "C" __global__ void ember_bench_add_one(const float* x, float* y) { y[0] = x[0] + 1.0f; }'


def cupy_device() -> Device:
    """The current CUDA device through CuPy."""
    import cupy

    props = cupy.cuda.runtime.getDeviceProperties(cupy.cuda.Device().id)
    name = props["name"].decode() if isinstance(props["name"], bytes) else str(props["name"])
    kernel = cupy.RawKernel(TRIVIAL_KERNEL, "ember_bench_add_one")

    def trivial_launch(x: Any) -> Callable[[], None]:
        y = cupy.empty_like(x)
        return lambda: kernel((1,), (1,), (x, y))

    def free() -> None:
        gc.collect()
        cupy.get_default_memory_pool().free_all_blocks()

    return Device(name, cupy, "cuda", cupy.asarray, cupy.cuda.Device().synchronize, trivial_launch, free)


def numpy_device(backend: str) -> Device:
    """NumPy arrays and an Ember CPU backend: the same run without a GPU (the tests use it)."""
    return Device(f"CPU ({backend})", np, backend, np.asarray, lambda: None)


@dataclass
class JaxPeer:
    """`jax.jit` on a GPU, or why not."""

    status: str
    jax: Any = None
    device: Any = None

    def put(self, x: np.ndarray) -> Any:
        return self.jax.device_put(x, self.device)


def find_jax(enabled: bool) -> JaxPeer:
    """JAX on the first GPU it sees, with float64 enabled (float32 inputs stay float32), float32 matmuls
    in full float32 like cuBLAS under CuPy and Ember (JAX's default on the GPU is TF32), and its allocator
    not preallocating (the default takes 75% of the GPU, leaving CuPy too little)."""
    if not enabled:
        return JaxPeer("disabled (--no-peers / --peers)")
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    try:
        import jax
    except ImportError:
        return JaxPeer('absent (pip install "jax[cuda13]")')
    except Exception as e:  # noqa: BLE001 - a broken JAX install is reported, not fatal
        return JaxPeer(f"jax failed to import ({short(e)})")
    try:
        gpus = jax.devices("gpu")
    except Exception as e:  # noqa: BLE001 - RuntimeError without a GPU backend; a broken plugin likewise
        return JaxPeer(f"no GPU for JAX ({short(e)})")
    jax.config.update("jax_enable_x64", True)
    jax.config.update("jax_default_matmul_precision", "highest")
    return JaxPeer(f"jax {jax.__version__} on {gpus[0]}", jax, gpus[0])


@dataclass
class Settings:
    """Timing budget: repetitions fill `budget_s` per workload, between min_reps and max_reps; a sample
    lasts at least `sample_s`."""

    budget_s: float
    sample_s: float
    min_reps: int
    max_reps: int


FULL = Settings(budget_s=2.0, sample_s=0.01, min_reps=7, max_reps=100)
QUICK = Settings(budget_s=0.2, sample_s=0.002, min_reps=3, max_reps=5)


@dataclass
class Timed:
    """One implementation: `call()` runs it (asynchronously), `wait(result)` waits for its work."""

    name: str
    call: Callable[[], Any]
    wait: Callable[[Any], Any]
    first_s: float | None = None
    samples: list[float] = field(default_factory=list)
    calls: int = 1

    def run(self) -> Any:
        """One call, waited for; its result."""
        out = self.call()
        self.wait(out)
        return out

    def sample(self) -> float:
        """Seconds per call over `calls` back-to-back calls and one wait."""
        start = time.perf_counter()
        out = None
        for _ in range(self.calls):
            out = self.call()
        self.wait(out)
        return (time.perf_counter() - start) / self.calls

    @property
    def median_s(self) -> float | None:
        return statistics.median(self.samples) if self.samples else None


def warm_up(t: Timed, settings: Settings) -> Any:
    """The first call (compiles; its time is kept), then a calibration call that sets `calls`."""
    start = time.perf_counter()
    out = t.run()
    t.first_s = time.perf_counter() - start
    start = time.perf_counter()
    t.run()
    once = max(time.perf_counter() - start, 1e-7)
    t.calls = max(1, min(10_000, math.ceil(settings.sample_s / once)))
    return out


def time_interleaved(impls: list[Timed], settings: Settings) -> None:
    """Fill each implementation's samples, one sample of each per repetition in rotating order."""
    if not impls:
        return
    per_rep = sum(t.sample() * t.calls for t in impls)   # also one sample each, discarded
    reps = max(settings.min_reps, min(settings.max_reps, int(settings.budget_s / max(per_rep, 1e-9))))
    for r in range(reps):
        for k in range(len(impls)):
            t = impls[(r + k) % len(impls)]
            t.samples.append(t.sample())


def mismatch(got: Any, want: Any, xp: Any) -> str | None:
    """Why `got` is not `want` (structure, shapes, dtypes, values within TOLERANCE of want's largest
    magnitude), or None when they agree."""
    got_leaves, want_leaves = tree_leaves(got), tree_leaves(want)
    if not want_leaves or len(got_leaves) != len(want_leaves):
        return f"{len(got_leaves)} outputs, expected {len(want_leaves)}"
    for i, (g, w) in enumerate(zip(got_leaves, want_leaves)):
        g, w = xp.asarray(g), xp.asarray(w)
        if g.shape != w.shape or g.dtype != w.dtype:
            return f"output {i}: {g.dtype}{list(g.shape)}, expected {w.dtype}{list(w.shape)}"
        scale = float(xp.max(xp.abs(w.astype(np.float64)))) if w.size else 0.0
        err = float(xp.max(xp.abs(g.astype(np.float64) - w))) if w.size else 0.0
        tol = TOLERANCE.get(np.dtype(w.dtype), 0.0) * max(scale, 1e-30)
        if not err <= tol:
            return f"output {i}: max |diff| {err:.3g} exceeds {tol:.3g} (of the largest magnitude {scale:.3g})"
    return None


def short(e: BaseException) -> str:
    """An exception in one line."""
    text = str(e).strip().splitlines()
    return f"{type(e).__name__}: {text[0] if text else ''}"[:300]


# -- running ----------------------------------------------------------------------------------------------


@dataclass
class Row:
    """A workload's medians (seconds) and first calls; `errors` per implementation (ember, cupy, jax);
    `calls` per sample and `reps` (samples) per implementation, for the JSON."""

    workload: str
    size: str
    ember_s: float | None = None
    hand_s: float | None = None
    jax_s: float | None = None
    ember_first_s: float | None = None
    jax_first_s: float | None = None
    errors: dict = field(default_factory=dict)
    calls: dict = field(default_factory=dict)
    reps: int = 0

    @property
    def ember_over_hand(self) -> float | None:
        return ratio(self.ember_s, self.hand_s)

    @property
    def ember_over_jax(self) -> float | None:
        return ratio(self.ember_s, self.jax_s)


def ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b else None


def ember_function(w: Workload, backend: str) -> Callable:
    """`ember.jit` of the workload's model on `backend`."""
    import ember

    return ember.jit(w.model(Ember(backend)), backend=backend)


def jax_function(w: Workload, peer: JaxPeer) -> Callable:
    """`jax.jit` of the workload's model."""
    return peer.jax.jit(w.model(Jax(peer.jax)))


def implementations(w: Workload, dev: Device, peer: JaxPeer, host_args: tuple, row: Row,
                    settings: Settings) -> list[Timed]:
    """The hand-written, Ember and JAX implementations whose first call ran and matched the hand-written
    result (the others get an error in `row`)."""
    args = tree_map(dev.asarray, host_args)
    hand = Timed("cupy", lambda: w.hand(dev.xp, *args), lambda out: dev.sync())
    impls: list[Timed] = []
    try:
        want = warm_up(hand, settings)
        impls.append(hand)
    except Exception as e:  # noqa: BLE001 - an error row, never an aborted run
        row.errors["cupy"] = short(e)
        return impls
    candidates = [("ember", lambda: ember_function(w, dev.backend), lambda: args, lambda out: dev.sync())]
    if peer.jax is not None:
        candidates.append(("jax", lambda: jax_function(w, peer), lambda: tree_map(peer.put, host_args),
                           lambda out: peer.jax.block_until_ready(out)))
    for name, build, place, wait in candidates:
        try:
            fn, fn_args = build(), place()
            t = Timed(name, lambda fn=fn, fn_args=fn_args: fn(*fn_args), wait)
            got = warm_up(t, settings)
            bad = mismatch(to_device(got, dev) if name == "jax" else got, want, dev.xp)
            if bad:
                row.errors[name] = f"result check failed: {bad}"
                continue
            impls.append(t)
        except Exception as e:  # noqa: BLE001 - an error row, never an aborted run
            row.errors[name] = short(e)
    return impls


def to_device(out: Any, dev: Device) -> Any:
    """JAX results as the device's arrays (zero copy through DLPack where it works), for the check."""
    leaves = []
    for leaf in tree_leaves(out):
        try:
            leaves.append(dev.xp.from_dlpack(leaf))
        except Exception:  # noqa: BLE001 - any DLPack failure: copy through the host instead
            leaves.append(dev.asarray(np.asarray(leaf)))
    return leaves


def run_workload(w: Workload, dev: Device, peer: JaxPeer, settings: Settings, size: dict) -> Row:
    """Check, then time, one workload; every failure lands in the row."""
    row = Row(w.name, w.size_text(size))
    try:
        impls = implementations(w, dev, peer, w.inputs(size), row, settings)
        time_interleaved(impls, settings)
    except Exception as e:  # noqa: BLE001 - an error row, never an aborted run
        row.errors["run"] = short(e)
        impls = []
    by = {t.name: t for t in impls}
    row.hand_s = by["cupy"].median_s if "cupy" in by else None
    if "ember" in by:
        row.ember_s, row.ember_first_s = by["ember"].median_s, by["ember"].first_s
    if "jax" in by:
        row.jax_s, row.jax_first_s = by["jax"].median_s, by["jax"].first_s
    row.calls = {t.name: t.calls for t in impls}
    row.reps = max((len(t.samples) for t in impls), default=0)
    return row


@dataclass
class Line:
    """One measured line under the table: what, value(s), and how it compares to its goal."""

    what: str
    text: str
    values: dict = field(default_factory=dict)
    error: str | None = None


def copy_bandwidth(dev: Device, settings: Settings, n: int) -> float:
    """Bytes read + written per second by a device-to-device copy of n float32 (CuPy's copy kernel)."""
    src = dev.xp.asarray(random_vector(n, np.float32, 3))
    dst = dev.xp.empty_like(src)
    t = Timed("copy", lambda: dev.xp.copyto(dst, src), lambda out: dev.sync())
    warm_up(t, settings)
    time_interleaved([t], settings)
    return 2 * src.nbytes / t.median_s


def bandwidth_line(w: Workload, dev: Device, peer: JaxPeer, settings: Settings, size: dict, copy_bps: float | None,
                   bytes_moved: Callable[[int], int]) -> Line:
    """A kernel's achieved bandwidth, Ember's and the hand-written one's, as a fraction of the copy's."""
    row = run_workload(w, dev, peer, settings, size)
    moved = bytes_moved(size["n"])
    values = {"bytes": moved, "copy_bytes_per_s": copy_bps}
    parts = []
    for name, s in (("ember", row.ember_s), ("cupy", row.hand_s), ("jax", row.jax_s)):
        if s is None:
            continue
        bps = moved / s
        values[f"{name}_s"], values[f"{name}_bytes_per_s"] = s, bps
        values[f"{name}_fraction_of_copy"] = ratio(bps, copy_bps)
        parts.append(f"{name} {fmt_time(s)} = {bps / 1e12:.2f} TB/s" + (f" ({bps / copy_bps:.2f} of copy)"
                                                                        if copy_bps else ""))
    error = "; ".join(f"{k}: {v}" for k, v in row.errors.items()) or None
    goal = " (goal: ember >= 0.80 of copy)" if copy_bps else ""
    return Line(f"{w.name}, {row.size} float32, {moved / 1e6:,.4g} MB moved", "; ".join(parts) + goal, values, error)


def overhead_line(dev: Device, peer: JaxPeer, settings: Settings, size: dict) -> Line:
    """Per-call time of the jitted `x + 1` on one element beside a bare RawKernel launch (goal <= 1.5x)."""
    row = run_workload(LAUNCH, dev, peer, settings, size)
    values: dict = {"ember_s": row.ember_s, "cupy_s": row.hand_s, "jax_s": row.jax_s}
    error = "; ".join(f"{k}: {v}" for k, v in row.errors.items()) or None
    text = f"ember {fmt_time(row.ember_s)}, cupy `x + 1` {fmt_time(row.hand_s)}, jax {fmt_time(row.jax_s)}"
    if dev.trivial_launch is not None:
        try:
            x = dev.asarray(LAUNCH.inputs(size)[0])
            launch = dev.trivial_launch(x)
            bare = Timed("RawKernel", launch, lambda out: dev.sync())
            warm_up(bare, settings)
            time_interleaved([bare], settings)
            values["raw_kernel_s"] = bare.median_s
            values["ember_over_raw_kernel"] = ratio(row.ember_s, bare.median_s)
            text += (f"; bare RawKernel launch {fmt_time(bare.median_s)}: ember / RawKernel "
                     f"{fmt_ratio(values['ember_over_raw_kernel'])} (goal <= 1.5x)")
            # as the bare launch does: into an output allocated once (a compiled call with out=)
            compiled = ember_function(LAUNCH, dev.backend).lower(x).compile()
            y = compiled(x)
            into = Timed("ember out=", lambda: compiled(x, out=y), lambda out: dev.sync())
            warm_up(into, settings)
            time_interleaved([into], settings)
            values["ember_out_s"] = into.median_s
            text += (f"; ember compiled with out= {fmt_time(into.median_s)} "
                     f"({fmt_ratio(ratio(into.median_s, bare.median_s))} of RawKernel)")
        except Exception as e:  # noqa: BLE001 - the line reports it
            error = short(e)
    return Line("launch overhead per call, x + 1 on one float32", text, values, error)


def fmt_ratio(r: float | None) -> str:
    return "—" if r is None else f"{r:.3g}x"


def fmt_ms(s: float | None) -> str:
    return "—" if s is None else f"{s * 1e3:.3g}"


@dataclass
class Results:
    """Everything one run measured, for the Markdown and the JSON."""

    device: str
    jax: str
    settings: dict
    rows: list[Row]
    lines: list[Line]
    wall_s: float = 0.0

    @property
    def failed(self) -> list[str]:
        out = [f"{r.workload}: {k}: {v}" for r in self.rows for k, v in r.errors.items()
               if not (k == "jax" and v.startswith("absent"))]
        return out + [f"{line.what}: {line.error}" for line in self.lines if line.error]


COLUMNS = ["workload", "size", "ember ms", "cupy ms", "jax ms", "ember / cupy", "ember / jax",
           "ember first call", "jax first call", "errors"]


def markdown(res: Results) -> str:
    """The table, then the bandwidth and overhead lines."""
    out = [f"# GPU benchmarks: {res.device}", "",
           f"Ember `backend=\"cuda\"` on CuPy arrays; *cupy*: the same math written by hand with CuPy; "
           f"*jax*: {res.jax}. Medians of {res.settings['min_reps']}-{res.settings['max_reps']} interleaved "
           f"samples (host clock, device synchronized); first call includes compiling. Wall time {res.wall_s} s.",
           "", "| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    for r in res.rows:
        errors = "; ".join(f"{k}: {v}" for k, v in r.errors.items()).replace("|", "\\|")
        cells = [r.workload, r.size, fmt_ms(r.ember_s), fmt_ms(r.hand_s), fmt_ms(r.jax_s),
                 fmt_ratio(r.ember_over_hand), fmt_ratio(r.ember_over_jax), fmt_time(r.ember_first_s),
                 fmt_time(r.jax_first_s), errors]
        out.append("| " + " | ".join(cells) + " |")
    out.append("")
    for line in res.lines:
        out.append(f"- **{line.what}**: {line.text}" + (f" — ERROR: {line.error}" if line.error else ""))
    return "\n".join(out) + "\n"


def to_json(res: Results) -> dict:
    rows = [dict(asdict(r), ember_over_cupy=r.ember_over_hand, ember_over_jax=r.ember_over_jax) for r in res.rows]
    return dict(device=res.device, jax=res.jax, settings=res.settings, wall_s=res.wall_s, rows=rows,
                lines=[asdict(line) for line in res.lines], failed=res.failed)


def bandwidth_lines(dev: Device, peer: JaxPeer, settings: Settings, tiny: bool) -> list[Line]:
    """The copy bandwidth (as many float32 as the elementwise kernel's input), then the fused elementwise
    kernel's and the sum's bandwidth as fractions of it."""
    n = (ELEMENTWISE.tiny if tiny else ELEMENTWISE.full)["n"]
    copy_bps = None
    try:
        copy_bps = copy_bandwidth(dev, settings, n)
        lines = [Line(f"device-to-device copy, n={n:,} float32", f"{copy_bps / 1e12:.2f} TB/s (bytes read + written)",
                      {"bytes_per_s": copy_bps})]
    except Exception as e:  # noqa: BLE001 - the line reports it
        lines = [Line(f"device-to-device copy, n={n:,} float32", "", error=short(e))]
    dev.free()
    for w, moved in ((ELEMENTWISE, lambda n: 2 * 4 * n), (REDUCTION, lambda n: 4 * n)):
        lines.append(bandwidth_line(w, dev, peer, settings, w.tiny if tiny else w.full, copy_bps, moved))
        dev.free()
    return lines


def run_all(dev: Device, peer: JaxPeer, settings: Settings, groups: list[str], tiny: bool = False) -> Results:
    """Every selected workload, then the bandwidth and overhead lines; tiny: the test sizes."""
    start = time.perf_counter()
    rows, lines = [], []
    for w in WORKLOADS:
        if w.group in groups:
            log(f"[gpu] {w.name} ({w.size_text(w.tiny if tiny else w.full)})")
            rows.append(run_workload(w, dev, peer, settings, w.tiny if tiny else w.full))
            dev.free()
    if "bandwidth" in groups:
        log("[gpu] bandwidth")
        lines += bandwidth_lines(dev, peer, settings, tiny)
    if "dispatch" in groups:
        log("[gpu] launch overhead")
        lines.append(overhead_line(dev, peer, settings, LAUNCH.full))
    return Results(dev.name, peer.status, asdict(settings), rows, lines, round(time.perf_counter() - start, 1))


def settings_for(args: argparse.Namespace) -> Settings:
    """Full or quick settings with the command line's --budget and --min-reps."""
    s = Settings(**asdict(QUICK if args.quick else FULL))
    if args.budget is not None:
        s.budget_s = args.budget
    if args.min_reps is not None:
        s.min_reps, s.max_reps = args.min_reps, max(s.max_reps, args.min_reps)
    return s


def main(args: argparse.Namespace, json_path: str, markdown_path: str) -> int:
    """`python -m benchmarks --backend cuda`: 0 if everything ran and matched, 1 if anything failed,
    2 (one line on stderr) without a usable GPU."""
    from ember.backends.cuda import runtime

    reason = runtime.missing_reason()
    if reason is not None:
        log(f"python -m benchmarks --backend cuda needs a GPU: {reason}")
        return 2
    enabled = not args.no_peers and "jax" in args.peers.split(",")
    peer = find_jax(enabled)
    log(f"peer jax: {peer.status}")
    try:
        dev = cupy_device()
    except Exception as e:  # noqa: BLE001 - one line, like the missing-GPU case
        log(f"python -m benchmarks --backend cuda: CuPy cannot use the device: {short(e)}")
        return 2
    res = run_all(dev, peer, settings_for(args), args.workloads or list(GROUPS))
    text = markdown(res)
    print(text)
    for path in (json_path, markdown_path):
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(markdown_path, "w") as f:
        f.write(text)
    with open(json_path, "w") as f:
        json.dump(to_json(res), f, indent=1)
    log(f"wrote {markdown_path} and {json_path} ({res.wall_s} s)")
    for failure in res.failed:
        log(f"FAILED: {failure}")
    return 1 if res.failed else 0
