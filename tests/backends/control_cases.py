"""Control-flow programs every backend must run: each is a function of NumPy arrays written with
ember.lax, its argument avals, and a Python-loop reference. Backends compile `traced(name)` (the graph
jit would hand them, before optimization) and compare with `reference`; the registry tests take the
one-node cases (`ONE_NODE_CONTROL`) as the example of each control primitive."""

from __future__ import annotations

import numpy as np

import ember.numpy as jnp
from ember import lax
from ember.tracer.aval import ShapedArray
from ember.tracer.trace import trace_flat

F, I = "float32", "int32"


def _scan_rnn(h0, xs, w):
    def step(h, x):
        h = jnp.tanh(h @ w + x)
        return h, jnp.sum(h * h)
    return lax.scan(step, h0, xs)


def _scan_rnn_ref(h0, xs, w):
    h, ys = h0, []
    for x in xs:
        h = np.tanh(h @ w + x)
        ys.append(np.sum(h * h))
    return h, np.array(ys, np.float32)


def _scan_reverse(c, xs):
    return lax.scan(lambda c, x: (c * 0.5 + x, c - x), c, xs, reverse=True)


def _scan_reverse_ref(c, xs):
    ys = np.empty_like(xs)
    for i in range(len(xs) - 1, -1, -1):
        ys[i] = c - xs[i]
        c = c * np.float32(0.5) + xs[i]
    return c, ys


def _scan_empty(c, xs):
    return lax.scan(lambda c, x: (c + x, x * 2.0), c, xs)


def _fori(x):
    return lax.fori_loop(0, 7, lambda i, v: v * 1.5 + i.astype(jnp.float32), x)


def _fori_ref(x):
    for i in range(7):
        x = x * np.float32(1.5) + np.float32(i)
    return x


def _while(x, limit):
    return lax.while_loop(lambda c: c[1] < limit, lambda c: (c[0] * 2.0, c[1] + 1), (x, jnp.int32(0)))


def _while_ref(x, limit):
    n = 0
    while n < limit:
        x, n = x * np.float32(2.0), n + 1
    return x, np.int32(n)


def _while_dynamic_fori(x, n):
    return lax.fori_loop(0, n, lambda i, v: jnp.sin(v) + v, x)


def _while_dynamic_fori_ref(x, n):
    for _ in range(int(n)):
        x = np.sin(x) + x
    return x


def _cond(p, x, y):
    return lax.cond(p > 0, lambda a, b: a * b + 1.0, lambda a, b: a - jnp.exp(b), x, y)


def _cond_ref(p, x, y):
    return x * y + np.float32(1.0) if p > 0 else x - np.exp(y)


def _switch(i, x):
    return lax.switch(i, [lambda a: a, lambda a: jnp.sin(a), lambda a: a * a], x)


def _switch_ref(i, x):
    return [x, np.sin(x), x * x][int(np.clip(i, 0, 2))]


def _nested(xs, w):
    def outer(c, x):
        inner, _ = lax.scan(lambda d, k: (jnp.tanh(d * w + k), None), c, x)
        return lax.cond(jnp.sum(inner) > 0, lambda v: v, lambda v: -v, inner), jnp.sum(inner)
    return lax.scan(outer, jnp.zeros(3, jnp.float32), xs)


def _nested_ref(xs, w):
    c, ys = np.zeros(3, np.float32), []
    for x in xs:
        d = c
        for k in x:
            d = np.tanh(d * w + k)
        c = d if np.sum(d) > 0 else -d
        ys.append(np.sum(d))
    return c, np.array(ys, np.float32)


# name -> (function, ((shape, dtype), ...), reference, argument makers or None)
PROGRAMS = {
    "scan-rnn": (_scan_rnn, (((4,), F), ((6, 4), F), ((4, 4), F)), _scan_rnn_ref),
    "scan-reverse": (_scan_reverse, (((3,), F), ((5, 3), F)), _scan_reverse_ref),
    "scan-empty": (_scan_empty, (((2,), F), ((0, 2), F)), lambda c, xs: (c, np.zeros((0, 2), np.float32))),
    "fori-static": (_fori, (((3, 2), F),), _fori_ref),
    "while": (_while, (((3,), F), ((), I)), _while_ref),
    "fori-dynamic": (_while_dynamic_fori, (((5,), F), ((), I)), _while_dynamic_fori_ref),
    "cond": (_cond, (((), F), ((4,), F), ((4,), F)), _cond_ref),
    "switch": (_switch, (((), I), ((2, 3), F)), _switch_ref),
    "nested-scan-cond": (_nested, (((4, 3, 3), F), ((3,), F)), _nested_ref),
}

# the example of each control primitive the backend registry tests compile
ONE_NODE_CONTROL = {"scan": "scan-rnn", "while": "while", "cond": "switch"}


def args_for(name: str, seed: int = 0) -> list[np.ndarray]:
    """Arguments for program `name` (loop counts and branch indices chosen to exercise the program)."""
    rng = np.random.default_rng(seed)
    _, avals, _ = PROGRAMS[name]
    out = []
    for shape, dtype in avals:
        if np.dtype(dtype).kind == "i":
            out.append(np.asarray(rng.integers(0, 4), dtype))
        else:
            out.append((rng.standard_normal(shape) * 0.5).astype(dtype))
    if name == "switch":
        out[0] = np.asarray(seed % 4, np.int32)  # 3 clamps to the last branch
    if name == "cond":
        out[0] = np.asarray(1.0 if seed % 2 == 0 else -1.0, np.float32)
    return out


def traced(name: str):
    """The graph of program `name` (flat outputs), as jit traces it."""
    fn, avals, _ = PROGRAMS[name]

    def flat(*a):
        out = fn(*a)
        return list(out) if isinstance(out, tuple) else [out]

    return trace_flat(flat, [ShapedArray(s, np.dtype(d)) for s, d in avals])


def reference(name: str, args) -> list[np.ndarray]:
    _, _, ref = PROGRAMS[name]
    out = ref(*[np.array(a) for a in args])
    return [np.asarray(o) for o in (out if isinstance(out, tuple) else (out,))]
