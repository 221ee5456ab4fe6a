"""A short tour of ember: `python -m ember.demo`.

Each section prints what ember computed next to a hand-written NumPy reference, and the graphs the
compiler saw, so the demo doubles as a smoke test of a fresh install.
"""

from __future__ import annotations

import numpy as np

import ember
import ember.nn as nn
import ember.numpy as jnp


def _section(title: str) -> None:
    print(f"\n=== {title} " + "=" * max(0, 70 - len(title)))


def _check(name: str, ours, reference, rtol=1e-6) -> None:
    err = float(np.max(np.abs(np.asarray(ours) - np.asarray(reference)))) if np.size(reference) else 0.0
    ok = np.allclose(ours, reference, rtol=rtol, atol=rtol)
    print(f"  {name:<48} max |ember - numpy| = {err:.2e}  {'ok' if ok else 'MISMATCH'}")
    if not ok:
        raise SystemExit(f"demo: {name} does not match the NumPy reference")


def eam(x):
    """The scalar-heavy energy of seed 001: rho = sum(exp(-3(x+1))), f = rho^2 + rho^3 + rho^4/4."""
    rho = jnp.sum(jnp.exp(-3.0 * (x + 1.0)))
    return rho**2 + rho**3 + 0.25 * rho**4


def eam_grad_by_hand(x):
    rho_i = np.exp(-3.0 * (x + 1.0))
    rho = rho_i.sum()
    return (2 * rho + 3 * rho**2 + rho**3) * (-3.0 * rho_i)


def main() -> None:
    rng = np.random.default_rng(0)
    print(f"ember {ember.__version__} on the '{ember.default_backend()}' backend")

    _section("jit: trace once, run many times")
    f = ember.jit(lambda w, x, b: jnp.tanh(w @ x + b))
    w, x, b = rng.standard_normal((4, 3)), rng.standard_normal((3, 2)), rng.standard_normal((4, 1))
    _check("tanh(w @ x + b)", f(w, x, b), np.tanh(w @ x + b))
    f(w, x, b)
    print(f"  cache: {f.cache_info()}")
    print(f.lower(w, x, b).text("traced"))

    _section("grad of a scalar-heavy function (seed 001)")
    x = rng.random(100)
    _check("grad(eam) vs hand-written gradient", ember.grad(eam)(x), eam_grad_by_hand(x))

    _section("dead gradients: a large constant costs nothing backward (seed 003)")
    for n in (10**3, 10**6):
        c = rng.standard_normal(n)
        onehot = np.zeros(n)
        onehot[0] = 1.0
        g = ember.make_graph(ember.grad(lambda p, c, e: jnp.dot(c, e) * p))(1.5, c, onehot)
        big = [nd.prim.name for nd in g.nodes if any(v.aval.size >= n for v in nd.outputs)]
        print(f"  n = {n:>8}: gradient graph has {len(g.nodes)} nodes; nodes producing n-sized values: {big}")
        _check(f"d/dp dot(c, e0) * p  (n = {n})",
               ember.grad(lambda p, c=c, e=onehot: jnp.dot(c, e) * p)(1.5), c[0])

    _section("per-sample gradients with vmap(grad) (seed 002)")
    params = nn.init_mlp([10, 32, 32, 10], seed=1, dtype=np.float64)
    xs = rng.standard_normal((256, 10))

    def loss(params, x):
        return jnp.sum(nn.mlp(params, x, jnp.tanh))

    per_sample = ember.jit(ember.vmap(ember.grad(loss), in_axes=(None, 0)))(params, xs)
    loop = [ember.grad(loss)(params, xs[i]) for i in range(3)]
    _check("vmap(grad) rows vs a loop of grads (first layer w)",
           per_sample[0][0][:3], np.stack([g[0][0] for g in loop]))
    print(f"  per-sample gradient of layer 0 weights: shape {per_sample[0][0].shape}")

    _section("custom_vjp: a sum with a hand-written adjoint (seed 001)")

    @ember.custom_vjp
    def sum_rho(x):
        return jnp.sum(jnp.exp(-3.0 * (x + 1.0)))

    sum_rho.defvjp(lambda x: (sum_rho(x), x), lambda x, g: (g * -3.0 * jnp.exp(-3.0 * (x + 1.0)),))

    def eam2(x):
        rho = sum_rho(x)
        return rho**2 + rho**3 + 0.25 * rho**4

    _check("grad(eam with custom adjoint)", ember.grad(eam2)(x), eam_grad_by_hand(x))

    _section("softmax of pairwise cosine similarities (seed 000)")
    a, bb = rng.standard_normal((16, 4, 64)), rng.standard_normal((16, 16, 64))

    def cosine_softmax(a, b):
        na = a / jnp.linalg.norm(a, axis=-1, keepdims=True)
        nb = b / jnp.linalg.norm(b, axis=-1, keepdims=True)
        return nn.softmax(jnp.einsum("krw,knw->krn", na, nb), axis=-1)

    ref_a = a / np.linalg.norm(a, axis=-1, keepdims=True)
    ref_b = bb / np.linalg.norm(bb, axis=-1, keepdims=True)
    sim = np.einsum("krw,knw->krn", ref_a, ref_b)
    ref = np.exp(sim - sim.max(-1, keepdims=True))
    _check("forward", ember.jit(cosine_softmax)(a, bb), ref / ref.sum(-1, keepdims=True))
    ga, gb = ember.grad(lambda a, b: jnp.sum(cosine_softmax(a, b) ** 2), argnums=(0, 1))(a, bb)
    print(f"  gradients: {ga.shape}, {gb.shape}")
    print("\ndemo finished: every result matched its NumPy reference")


if __name__ == "__main__":
    main()
