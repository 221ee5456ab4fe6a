"""Primitives and the rule tables keyed by them.

Every primitive owns a shape/dtype rule and a numpy reference; a `transformable` one (every
user-visible primitive) also a VJP rule and a batching rule (here); the LLVM and CUDA lowerings live
in the backends that own them. `tests/tracer/test_registry.py` enumerates `primitives` and fails on
any gap. `kind` classifies a primitive for fusion and the registry tests (see KINDS).

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

from ember.errors import TransformError

# elementwise: one output element from the same element of each operand (0-d operands broadcast);
# layout: moves, repeats or generates elements without arithmetic (broadcast, reshape, slice, iota);
# reduction: combines elements along axes; contraction: dot_general; indexing: data-dependent
# positions (gather, scatter); opaque: anything else (custom_vjp_call, fusions).
KINDS = ("elementwise", "layout", "reduction", "contraction", "indexing", "opaque")


class Primitive:
    """A named operation of the IR. `bind` applies it to tracers (staging) or arrays (eagerly).

    `transformable=False` marks an internal primitive (a fusion) that grad and vmap never meet, so
    it needs no VJP or batching rule.
    """

    __slots__ = ("name", "multiple_results", "kind", "transformable")

    def __init__(self, name: str, multiple_results: bool = False, *, kind: str, transformable: bool = True):
        if name in primitives:
            raise ValueError(f"primitive {name!r} is already registered")
        if kind not in KINDS:
            raise ValueError(f"primitive {name!r}: kind {kind!r} is not one of {KINDS}")
        self.name = name
        self.multiple_results = multiple_results
        self.kind = kind
        self.transformable = transformable
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



class LazyCotangent:
    """A cotangent kept symbolic by a VJP rule (zero outside a region, a scatter): autodiff's
    accumulator adds the dense contributions first, then applies each lazy one with `add_to`, so
    only the touched region is written."""

    __slots__ = ()

    def add_to(self, dense, aval):
        """`dense + self` as a traced value of `aval`; `dense` is None when there is no dense part."""
        raise NotImplementedError


def transform_rule(table: dict, prim: Primitive, transform: str, loc: str | None = None) -> Callable:
    """`prim`'s rule in `table`; an internal primitive has none, so meeting it (at the user's line
    `loc`) is a clear error."""
    rule = table.get(prim)
    if rule is None:
        why = "it is internal to the optimizer" if not prim.transformable else "it has no such rule"
        raise TransformError(f"{transform} cannot transform primitive {prim.name} ({why}); apply {transform} "
                             "to the traced function, before optimization passes run", loc)
    return rule


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
