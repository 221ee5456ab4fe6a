"""Rematerialization: the VJP rule of remat_call, registered here because it needs autodiff.

The forward pass (remat_call's vjp_fwd rule) kept only the call's operands and the values its policy
saves. The backward pass linearizes the body again on those operands, reusing the saved values and
emitting the rest anew with role "recompute" (CSE never merges such a node into the forward's copy, so
the forward's intermediates die early), then pulls the cotangents back through it. Everything it
emits is ordinary nodes, so the result differentiates again (grad of grad, forward mode by transposing).
"""

from __future__ import annotations

from ember.passes.autodiff import ROLE_RECOMPUTE, linearize
from ember.tracer.primitive import def_vjp
from ember.tracer.prims.remat import remat_call_p, saveable


@def_vjp(remat_call_p)
def _remat_vjp(cts, *ins, out, active, saved, body, policy, prevent_cse, name):
    """Recompute the body's forward from the operands and the saved values, then pull `cts` back."""
    known = dict(zip(saveable(body, policy), saved))
    role = ROLE_RECOMPUTE if prevent_cse else None
    _, pullback = linearize(body, list(ins), list(active), known=known, forward_role=role)
    return tuple(pullback(list(cts)))
