"""Record jax.nn's answers for the cases of tests/nn/cases.py in tests/nn/jax_values.json: values and
gradients of the activations on the kink grid (float32 and float64), the reductions and their gradients,
one_hot, the result dtypes of integer inputs, jax.nn's public names, and what jax.nn.initializers
create from fixed keys. The suite reads the file; JAX
is needed only to run this again:

    python -m tests.nn.record_jax
"""

from __future__ import annotations

import json

import jax
import jax.numpy as jjnp
import numpy as np

from tests.nn import cases as C


def _x64(*args) -> bool:
    return any(isinstance(a, np.ndarray) and a.dtype.itemsize == 8 for a in args)


def elementwise() -> dict:
    out = {}
    for cid, (name, kw) in C.ELEMENTWISE_IDS.items():
        fn = getattr(jax.nn, name)
        for dtype in C.FLOATS:
            x = C.grid(dtype)
            with jax.enable_x64(dtype == "float64"):
                values = fn(x, **kw)
                grads = jax.vmap(jax.grad(lambda v, fn=fn, kw=kw: fn(v, **kw)))(x)
            out[f"{cid}/{dtype}"] = {"x": C.encode(x), "values": C.encode(values), "grads": C.encode(grads)}
    return out


def reductions() -> dict:
    out = {}
    for what, fn in C.REDUCTIONS.items():
        for dtype in C.FLOATS:
            x = C.X.astype(dtype)
            with jax.enable_x64(dtype == "float64"):
                value = fn(jax.nn, x)
                entry = {"values": [C.encode(v) for v in (value if isinstance(value, tuple) else (value,))]}
                if dtype == "float64":
                    loss = C.weighted_loss(fn, jax.nn, jjnp, np.shape(C.first(value)))
                    entry["grad"] = C.encode(jax.grad(loss)(x))
            out[f"{what}/{dtype}"] = entry
    with jax.enable_x64(True):
        for name in C.INFINITE_CASES:
            out[f"{name} infinite/float64"] = {"values": [C.encode(getattr(jax.nn, name)(C.INFINITE, axis=-1))]}
    return out


def one_hot() -> dict:
    out = {}
    for cid, (args, kw) in C.ONE_HOT.items():
        with jax.enable_x64(_x64(*args)):
            out[cid] = C.encode(jax.nn.one_hot(*args, **kw))
    return out


def promotion(x64: bool = False) -> dict:
    """name/dtype -> JAX's result (None where JAX raises a TypeError for that dtype); in 64-bit mode
    with `x64`, and one_hot's default dtype there."""
    out = {}
    for dtype in C.PROMOTION_X64_DTYPES if x64 else C.PROMOTION_DTYPES:
        x = np.array(C.PROMOTION_INPUT, dtype)
        for name in C.PROMOTION_NAMES:
            with jax.enable_x64(x64 or dtype == "int64"):
                try:
                    out[f"{name}/{dtype}"] = C.encode(getattr(jax.nn, name)(x))
                except TypeError:
                    out[f"{name}/{dtype}"] = None
    if x64:
        with jax.enable_x64(True):
            out["one_hot"] = C.encode(jax.nn.one_hot(np.array([0, 2], np.int32), 3))
    return out


def initializers(x64: bool = False) -> dict:
    out = {}
    for cid in C.INITIALIZERS_X64 if x64 else C.INITIALIZERS:
        init, args = C.make_initializer(jax.nn.initializers, cid)
        with jax.enable_x64(x64 or C.INITIALIZERS[cid][3] == "float64"):
            out[cid] = C.encode(init(C.make_key(jax.random, cid), *args))
    return out


def main() -> None:
    values = {"jax_version": jax.__version__, "elementwise": elementwise(), "reductions": reductions(),
              "one_hot": one_hot(), "promotion": promotion(),
              "promotion_x64": promotion(x64=True), "initializers": initializers(),
              "initializers_x64": initializers(x64=True),
              "names": sorted(n for n in dir(jax.nn) if not n.startswith("_"))}
    C.VALUES.write_text(json.dumps(values, separators=(",", ":")) + "\n")
    print(f"wrote {C.VALUES} ({C.VALUES.stat().st_size} bytes) with JAX {jax.__version__}")


if __name__ == "__main__":
    main()
