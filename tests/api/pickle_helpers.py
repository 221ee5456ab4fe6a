"""Module-level transformed functions for tests/api/test_pickle.py (they pickle by qualified name)."""

import ember
import ember.numpy as jnp


@ember.jit
def jitted_loss(w, x):
    return jnp.sum(jnp.tanh(x @ w) ** 2)


def loss(w, x):
    return jnp.sum(jnp.tanh(x @ w) ** 2)


grad_of_loss = ember.grad(loss)


@ember.custom_vjp
def clip_gradient(x):
    return x


def _clip_fwd(x):
    return x, None


def _clip_bwd(_, g):
    return (jnp.clip(g, -1.0, 1.0),)


clip_gradient.defvjp(_clip_fwd, _clip_bwd)
