"""The public API: jit, grad, value_and_grad, vjp, jvp, linearize, vmap, jacrev, jacfwd, hessian, custom_vjp,
custom_jvp, make_graph, dump."""

from ember.api.autodiff import grad, jacobian, jacrev, stop_gradient, value_and_grad, vjp
from ember.api.batching import vmap
from ember.api.custom import custom_vjp
from ember.api.custom_jvp import custom_jvp
from ember.api.forward import hessian, jacfwd, jvp, linearize
from ember.api.jit import Jitted, dump, jit, make_graph
from ember.api.lowered import Compiled, Lowered

__all__ = ["jit", "grad", "value_and_grad", "vjp", "jvp", "linearize", "jacfwd", "vmap", "jacrev", "jacobian",
           "hessian", "custom_vjp", "custom_jvp",
           "stop_gradient", "make_graph", "dump", "Jitted", "Lowered", "Compiled"]
