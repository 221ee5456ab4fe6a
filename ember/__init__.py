"""Ember: trace numerical Python into a graph, differentiate and batch it, optimize it and compile it.

    import ember
    import ember.numpy as jnp

    @ember.jit
    def loss(w, x): return jnp.sum(jnp.tanh(x @ w) ** 2)

    ember.grad(loss)(w, x)
"""

from ember import ad_checkpoint, config, lax, nn, numpy, random, scipy, tree, tree_util  # noqa: F401
from ember.api import (
    Compiled,
    Jitted,
    Lowered,
    custom_jvp,
    custom_vjp,
    dump,
    grad,
    hessian,
    jacfwd,
    jacobian,
    jacrev,
    jit,
    jvp,
    linearize,
    make_graph,
    stop_gradient,
    value_and_grad,
    vjp,
    vmap,
)
from ember.api.devices import (
    block_until_ready,
    device_count,
    device_get,
    device_put,
    devices,
    local_device_count,
    local_devices,
)
from ember.api.remat import checkpoint, checkpoint_policies, remat
from ember.backends import available_backends, default_backend
from ember.config import enable_x64
from ember.errors import (
    ArgumentError,
    ConcretizationError,
    DTypeError,
    EmberError,
    ShapeError,
    TracerEscapeError,
    TransformError,
)
from ember.numpy.util import register_eager_compiler as _register_eager_compiler
from ember.tracer import Graph
from ember.tracer.array import Array
from ember.tree import register_pytree_node

__version__ = "0.1.0"


def _compile_eager(targets: dict) -> dict:
    """The eager fast path's native callables, compiled by the llvm backend (imported on first use)."""
    from ember.backends.llvm.eager import compile_native

    return compile_native(targets)


_register_eager_compiler(_compile_eager)

__all__ = [
    "jit", "grad", "value_and_grad", "vjp", "jvp", "linearize", "jacfwd", "vmap", "jacrev", "jacobian", "hessian",
    "custom_vjp", "custom_jvp", "checkpoint", "remat", "checkpoint_policies", "ad_checkpoint",
    "stop_gradient", "make_graph", "dump", "Jitted", "Lowered", "Compiled", "default_backend",
    "available_backends", "Graph", "enable_x64", "Array", "device_put", "device_get", "block_until_ready",
    "devices", "local_devices", "device_count", "local_device_count",
    "register_pytree_node", "EmberError", "ShapeError", "DTypeError", "ConcretizationError",
    "TracerEscapeError", "ArgumentError", "TransformError", "numpy", "lax", "nn", "random", "tree", "tree_util",
    "config",
]

# JAX names that ember does not have (yet), with what to use instead; looked up only when an attribute
# is missing, so that porting JAX code says what is absent rather than failing with a bare AttributeError.
_JAX_ONLY: dict[str, str] = {
    "pmap": "use ember.vmap on one device",
    "make_jaxpr": "use ember.make_graph",
    "eval_shape": "use ember.make_graph(f)(*args) and read the output avals",
    "ensure_compile_time_eval": "compute the value with NumPy outside the traced function",
    "disable_jit": "call the Python function itself, without ember.jit",
    "shard_map": "ember does not shard across devices",
    "pure_callback": "compute the value outside the traced function and pass it in",
    "debug": "return intermediate values from the function to inspect them",
    "dtypes": "use numpy dtypes",
    "image": "not available", "ops": "not available", "experimental": "not available",
    "sharding": "ember does not shard across devices", "profiler": "not available",
    "named_call": "not needed: graphs record each node's source line", "export": "use Lowered.dump",
    # JAX 0.10.2's other top-level names that ported code reaches for (ember/jax_names.py lists them all)
    "ShapeDtypeStruct": "trace with arrays of that shape and dtype (ember.make_graph(f)(*args) gives the avals)",
    "clear_caches": "call clear_cache() on each ember.jit function",
    "custom_gradient": "use ember.custom_vjp",
    "linear_transpose": "use ember.vjp of the linear function",
    "closure_convert": "pass the closed-over arrays to the function as arguments",
    "named_scope": "not needed: graphs record each node's source line",
    "typeof": "read x.shape and x.dtype",
    "default_device": "pick the backend with jit(..., backend=...) or EMBER_BACKEND",
    "Device": "ember names backends, not devices; see ember.available_backends()",
    "process_count": "ember runs in one process", "process_index": "ember runs in one process",
    "make_mesh": "ember does not shard across devices", "NamedSharding": "ember does not shard across devices",
    "float0": "grad takes float inputs only, so no float0 cotangents arise",
    "checking_leaks": "ember raises TracerEscapeError whenever a traced value outlives its trace",
    "debug_nans": "use ember.config.update('ember_debug_nans', True)",
    "debug_infs": "use ember.config.update('ember_debug_infs', True)",
    "custom_batching": "ember has no custom batching rules for user functions; ember.vmap batches the primitives",
    "dlpack": "arrays are NumPy arrays: np.from_dlpack takes them", "ffi": "not available",
    "print_environment_info": "print ember.__version__ and ember.available_backends()",
}


def __getattr__(name: str):
    """Say when a missing attribute is a JAX name that ember lacks, and what to use instead."""
    hint = _JAX_ONLY.get(name)
    if hint is None:
        from ember.errors import missing_attribute

        raise missing_attribute("ember", name, globals())
    raise AttributeError(f"ember does not implement jax.{name} yet; {hint}")
