"""checkpoint (alias remat): trade recomputation for memory under differentiation, as `jax.checkpoint`.

    @ember.checkpoint
    def layer(w, x): return jnp.tanh(w @ x)

Values are unchanged. Under grad the intermediates of the function are not kept from the forward pass:
the backward pass recomputes them from the function's inputs, except the values the `policy` saves.
The function is traced once into a `remat_call` node (ember/tracer/prims/remat.py) holding its body;
policies follow JAX's protocol, `policy(prim, *avals, **params) -> bool`, and `checkpoint_policies`
holds JAX's named ones. `checkpoint_name(x, name)` names a value for the policies that save by name.
"""

from __future__ import annotations

import functools
import types
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import ember.passes.remat  # noqa: F401  (registers remat_call's VJP rule)
from ember.api.custom import closure_convert
from ember.api.tracing import check_callable, fun_name, trace_pytree
from ember.errors import ArgumentError, user_location
from ember.tracer import prims as P
from ember.tracer.prims.remat import checkpoint_name, checkpoint_name_p, remat_call_p
from ember.tracer.trace import is_tracing
from ember.tree import tree_unflatten


def everything_saveable(*_, **__) -> bool:
    """Save every residual, as if checkpoint were not used."""
    return True


def nothing_saveable(*_, **__) -> bool:
    """Save nothing: recompute every intermediate (checkpoint's default)."""
    return False


@dataclass(frozen=True)
class DotsSaveable:
    """Save the outputs of dot_general and conv_general_dilated (only dot_generals without batch
    dimensions when asked), as JAX's."""

    only_if_no_batch_dims: bool

    def __call__(self, prim, *_, **params) -> bool:
        if not self.only_if_no_batch_dims:
            return prim is P.dot_general_p or prim is P.conv_general_dilated_p
        if prim is not P.dot_general_p:
            return False
        (_, _), (lhs_batch, rhs_batch) = params["dimension_numbers"]
        return not lhs_batch and not rhs_batch


dots_saveable = DotsSaveable(False)
dots_with_no_batch_dims_saveable = DotsSaveable(True)


@dataclass(frozen=True)
class SaveOnlyTheseNames:
    """Save only values named (checkpoint_name) with one of `names`."""

    names: frozenset[str]

    def __call__(self, prim, *_, **params) -> bool:
        return prim is checkpoint_name_p and params["name"] in self.names


@dataclass(frozen=True)
class SaveAnyNamesButThese:
    """Save only named values, except those named with one of `names`."""

    names: frozenset[str]

    def __call__(self, prim, *_, **params) -> bool:
        return prim is checkpoint_name_p and params["name"] not in self.names


@dataclass(frozen=True)
class SaveAnythingExceptTheseNames:
    """Save every value except those named with one of `names` (recomputed, whatever computes them)."""

    names: frozenset[str]

    def __call__(self, prim, *_, **params) -> bool:
        return prim is not checkpoint_name_p or params["name"] not in self.names


def save_only_these_names(*names: str) -> SaveOnlyTheseNames:
    """Save only the values named with one of `names`."""
    return SaveOnlyTheseNames(frozenset(names))


def save_any_names_but_these(*names: str) -> SaveAnyNamesButThese:
    """Save only named values, except those named with one of `names`."""
    return SaveAnyNamesButThese(frozenset(names))


def save_anything_except_these_names(*names: str) -> SaveAnythingExceptTheseNames:
    """Save everything but the values named with one of `names` (JAX's saves everything: a known gap)."""
    return SaveAnythingExceptTheseNames(frozenset(names))


checkpoint_policies = types.SimpleNamespace(
    everything_saveable=everything_saveable,
    nothing_saveable=nothing_saveable,
    dots_saveable=dots_saveable,
    checkpoint_dots=dots_saveable,
    dots_with_no_batch_dims_saveable=dots_with_no_batch_dims_saveable,
    checkpoint_dots_with_no_batch_dims=dots_with_no_batch_dims_saveable,
    save_only_these_names=save_only_these_names,
    save_any_names_but_these=save_any_names_but_these,
    save_anything_except_these_names=save_anything_except_these_names,
)


def _static_positions(static_argnums: Sequence[int], n_args: int) -> frozenset[int]:
    """`static_argnums` as non-negative positions, checked against the call's arguments as JAX does."""
    if any(not isinstance(i, int) or not -n_args <= i < n_args for i in static_argnums):
        raise ValueError("the `static_argnums` argument to `ember.checkpoint` / `ember.remat` can only take "
                         f"integer values greater than or equal to `-len(args)` and less than `len(args)`, but "
                         f"got {tuple(static_argnums)}, while `len(args)` = {n_args}")
    return frozenset(i % n_args for i in static_argnums)


def _bind(fun: Callable, args: tuple, kwargs: dict, static: frozenset[int], policy, prevent_cse: bool):
    """Trace `fun` on the dynamic arguments (static ones bound as Python values) into a remat_call."""
    name = fun_name(fun)
    dyn = tuple(a for i, a in enumerate(args) if i not in static)

    def with_static(*d, **kw):
        it = iter(d)
        return fun(*[args[i] if i in static else next(it) for i in range(len(args))], **kw)

    # Without static arguments fun itself is traced, so errors name its own parameters.
    graph, leaves, _, out_tree = trace_pytree(with_static if static else fun, dyn, kwargs, transform="checkpoint")
    body, hoisted = closure_convert(graph)
    outs = remat_call_p.bind(*hoisted, *leaves, body=body, policy=policy, prevent_cse=prevent_cse, name=name)
    return tree_unflatten(out_tree, outs)


def checkpoint(fun: Callable, *, prevent_cse: bool = True, policy: Callable | None = None,
               static_argnums: int | Sequence[int] = ()) -> Callable:
    """`fun` with the same values, whose intermediates differentiation recomputes in the backward pass
    instead of keeping them from the forward pass (except what `policy` saves; default: nothing).
    `prevent_cse=False` lets CSE merge the recomputation with the forward's (undoing the saving)."""
    check_callable(fun, "checkpoint")
    if policy is None:
        policy = nothing_saveable
    elif not callable(policy):
        raise ArgumentError(f"checkpoint: policy must be a callable policy(prim, *avals, **params) -> bool such "
                            f"as ember.checkpoint_policies.dots_saveable, got {type(policy).__name__} "
                            f"{policy!r}", user_location())
    argnums = (static_argnums,) if isinstance(static_argnums, int) else tuple(static_argnums)

    @functools.wraps(fun)
    def checkpointed(*args, **kwargs):
        static = _static_positions(argnums, len(args)) if argnums else frozenset()
        if not is_tracing():
            return fun(*args, **kwargs)
        return _bind(fun, args, kwargs, static, policy, bool(prevent_cse))

    return checkpointed


remat = checkpoint
__all__ = ["checkpoint", "remat", "checkpoint_policies", "checkpoint_name"]
