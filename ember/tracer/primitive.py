"""Primitives and the rule tables keyed by them.

Every primitive owns a shape/dtype rule, a numpy reference, a VJP rule and a batching rule (here);
the LLVM and CUDA lowerings live in the backends that own them. `tests/tracer/test_registry.py`
enumerates `primitives` and fails on any gap.

Rule signatures (`*ins` are the operands, Literals arrive as NumPy scalars):
- shape rule:  ``rule(*avals, **params) -> ShapedArray`` (a tuple for multiple_results)
- numpy impl:  ``impl(*arrays, **params) -> np.ndarray`` (a tuple for multiple_results)
- VJP rule:    ``rule(ct, *ins, out, active, **params) -> tuple`` of one cotangent per operand,
  None where the operand is inactive (`active[i]` false) or the cotangent is zero. `out` is the
  forward output, so rules like exp/tanh can use it instead of the input.
- batch rule:  ``rule(args, dims, **params) -> (out, out_dim)``; `dims[i]` is the batch axis of
  operand i or None when it is not batched.
"""

from __future__ import annotations

from collections.abc import Callable


class Primitive:
    """A named operation of the IR. `bind` applies it to tracers (staging) or arrays (eagerly)."""

    __slots__ = ("name", "multiple_results")

    def __init__(self, name: str, multiple_results: bool = False):
        if name in primitives:
            raise ValueError(f"primitive {name!r} is already registered")
        self.name = name
        self.multiple_results = multiple_results
        primitives[name] = self

    def bind(self, *args, **params):
        from ember.tracer.trace import bind

        return bind(self, args, params)

    def __repr__(self):
        return self.name


primitives: dict[str, Primitive] = {}
shape_rules: dict[Primitive, Callable] = {}
impl_rules: dict[Primitive, Callable] = {}
vjp_rules: dict[Primitive, Callable] = {}
batch_rules: dict[Primitive, Callable] = {}
# Optional: how a primitive's forward runs when it is differentiated, ``rule(*ins, active, **params)
# -> (outs, saved)``; `saved` reaches its VJP rule as the keyword `saved` (custom_vjp_call uses it).
vjp_fwd_rules: dict[Primitive, Callable] = {}

# Prims whose numpy reference may return a view of an operand (the numpy backend copies such
# outputs before handing them to the user).
view_prims: set[Primitive] = set()


def _register(table: dict, prim: Primitive):
    def deco(fn):
        table[prim] = fn
        return fn

    return deco


def def_shape(prim: Primitive):
    return _register(shape_rules, prim)


def def_impl(prim: Primitive):
    return _register(impl_rules, prim)


def def_vjp(prim: Primitive):
    return _register(vjp_rules, prim)


def def_batch(prim: Primitive):
    return _register(batch_rules, prim)
