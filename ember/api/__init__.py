"""The public API: jit, grad, value_and_grad, vjp, vmap, jacrev, hessian, custom_vjp, make_graph, dump."""

from ember.api.autodiff import grad, jacobian, jacrev, stop_gradient, value_and_grad, vjp
from ember.api.batching import vmap
from ember.api.custom import custom_vjp
from ember.api.forward import hessian, jacfwd, jvp, linearize
from ember.api.jit import Jitted, dump, jit, make_graph
from ember.api.lowered import Compiled, Lowered

__all__ = ["jit", "grad", "value_and_grad", "vjp", "jvp", "linearize", "jacfwd", "vmap", "jacrev", "jacobian",
           "hessian", "custom_vjp",
           "stop_gradient", "make_graph", "dump", "Jitted", "Lowered", "Compiled"]
