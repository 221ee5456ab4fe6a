"""Primitives and the rule tables keyed by them.

Every primitive owns a shape/dtype rule and a numpy reference; a `transformable` one (every
user-visible primitive) also a VJP rule and a batching rule (here); the LLVM and CUDA lowerings live
in the backends that own them. `tests/tracer/test_registry.py` enumerates `primitives` and fails on
any gap. `kind` classifies a primitive for fusion and the registry tests (see KINDS).

The facts every pass or backend asks of a primitive live on it, set where it is defined: its cost
class (`expensive`), whether its numpy reference may return a view of an operand (`may_view`) and
the NumPy ufunc that computes it (`ufunc`, or `no_ufunc` saying why none does).

Rule signatures (`*ins` are the operands, Literals arrive as NumPy scalars):
- shape rule:  ``rule(*avals, **params) -> ShapedArray`` (a tuple for multiple_results)
- numpy impl:  ``impl(*arrays, **params) -> np.ndarray`` (a tuple for multiple_results)
- VJP rule:    ``rule(ct, *ins, out, active, **params) -> tuple`` of one cotangent per operand,
  None where the operand is inactive (`active[i]` false) or the cotangent is zero. `out` is the
  forward output, so rules like exp/tanh can use it instead of the input.
- batch rule:  ``rule(args, dims, **params) -> (out, out_dim)``; `dims[i]` is the batch axis of
  operand i or None when it is not batched.
- JVP rule:    ``rule(primals, tangents, **params) -> (outs, out_tangents)``, a tangent None where it
  is zero (lists for multiple_results). Optional: forward mode (ember/passes/forward.py) transposes
  the VJP rule of a primitive without one; the registry test requires one or the other.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ember.errors import TransformError

# elementwise: one output element from the same element of each operand (0-d operands broadcast);
# layout: moves, repeats or generates elements without arithmetic (broadcast, reshape, slice, iota);
# reduction: combines elements along axes; contraction: dot_general; indexing: data-dependent
# positions (gather, scatter); opaque: anything else (custom_vjp_call, fusions).
KINDS = ("elementwise", "layout", "reduction", "contraction", "indexing", "opaque")


class Primitive:
    """A named operation of the IR. `bind` applies it to tracers (staging) or arrays (eagerly).

    `transformable=False` marks an internal primitive (a fusion) that grad and vmap never meet, so
    it needs no VJP or batching rule. The facts (the registry tests require each to be decided):
    - `expensive`: never duplicated or recomputed by fusion (XLA's IsExpensive); None is undecided.
    - `may_view`: its numpy reference may return a view of operand 0 (or the operand itself).
    - `ufunc`: the NumPy ufunc (a str: the name of a `scipy.special` ufunc, imported only when
      used) that computes exactly what the numpy reference does, for the dtypes `ufunc_dtypes`
      (names; None: every dtype the primitive takes); the numpy backend calls it with `out=` to
      write a result in place. `no_ufunc` says why an elementwise primitive has none.
    """

    __slots__ = ("name", "multiple_results", "kind", "transformable", "expensive", "may_view", "ufunc",
                 "ufunc_dtypes", "no_ufunc")

    def __init__(self, name: str, multiple_results: bool = False, *, kind: str, transformable: bool = True,
                 expensive: bool | None = None, may_view: bool = False, ufunc: np.ufunc | str | None = None,
                 ufunc_dtypes: tuple[str, ...] | None = None, no_ufunc: str | None = None):
        if name in primitives:
            raise ValueError(f"primitive {name!r} is already registered")
        if kind not in KINDS:
            raise ValueError(f"primitive {name!r}: kind {kind!r} is not one of {KINDS}")
        _check_ufunc(name, ufunc, ufunc_dtypes, no_ufunc)
        self.name = name
        self.multiple_results = multiple_results
        self.kind = kind
        self.transformable = transformable
        self.expensive = expensive
        self.may_view = may_view
        self.ufunc = ufunc
        self.ufunc_dtypes = None if ufunc_dtypes is None else frozenset(np.dtype(d) for d in ufunc_dtypes)
        self.no_ufunc = no_ufunc
        primitives[name] = self

    def bind(self, *args, **params):
        from ember.tracer.trace import bind

        return bind(self, args, params)

    def __repr__(self):
        return self.name


def _check_ufunc(name: str, ufunc, ufunc_dtypes, no_ufunc) -> None:
    """The ufunc facts are consistent: a ufunc or a reason for none, not both; dtypes only with a ufunc."""
    if ufunc is not None and not isinstance(ufunc, (np.ufunc, str)):
        raise TypeError(f"primitive {name!r}: ufunc must be a numpy ufunc or a scipy.special name, got {ufunc!r}")
    if ufunc is not None and no_ufunc is not None:
        raise ValueError(f"primitive {name!r} has a ufunc and a reason for having none")
    if ufunc is None and ufunc_dtypes is not None:
        raise ValueError(f"primitive {name!r}: ufunc_dtypes without a ufunc")


primitives: dict[str, Primitive] = {}
shape_rules: dict[Primitive, Callable] = {}
impl_rules: dict[Primitive, Callable] = {}
vjp_rules: dict[Primitive, Callable] = {}
batch_rules: dict[Primitive, Callable] = {}
# Optional: how a primitive's forward runs when it is differentiated, ``rule(*ins, active, **params)
# -> (outs, saved)``; `saved` reaches its VJP rule as the keyword `saved` (custom_vjp_call uses it).
vjp_fwd_rules: dict[Primitive, Callable] = {}
jvp_rules: dict[Primitive, Callable] = {}
# the numpy reference of an elementwise primitive as a function of its operands alone (a ufunc where it is
# one), which its impl rule calls: the eager replay calls it directly (one Python call less per op)
operand_impls: dict[Primitive, Callable] = {}
# (params, operand avals) -> a function of the operands alone that computes the impl for operands of those
# avals (or a tuple: the function and arguments to pass after the operands), or None: the eager replay calls
# it for a primitive whose impl picks its path by shape and dtype. Its result must be new memory (an array,
# or a NumPy scalar for a 0-d result) of the output's dtype wherever that dtype is the output's
eager_specializers: dict[Primitive, Callable] = {}


def ufunc_of(prim: Primitive) -> np.ufunc | None:
    """`prim.ufunc` as a ufunc: a scipy.special name is imported here, when first used (importing
    scipy.special costs more than 0.1 s, which `import ember` does not pay)."""
    if isinstance(prim.ufunc, str):
        import scipy.special

        return getattr(scipy.special, prim.ufunc)
    return prim.ufunc


def reference(prim: Primitive, impl: Callable | None = None) -> Callable:
    """An elementwise primitive's numpy reference: `impl`, else its ufunc (a scipy.special ufunc's
    result rounded to the first operand's dtype: scipy computes float16 in a wider type)."""
    if impl is not None:
        return impl
    if prim.ufunc is None:
        raise TypeError(f"primitive {prim.name!r} needs a numpy reference (impl) or a ufunc")
    if isinstance(prim.ufunc, np.ufunc):
        return prim.ufunc

    def scipy_reference(*xs):
        return ufunc_of(prim)(*xs).astype(xs[0].dtype, copy=False)

    return scipy_reference


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


def def_jvp(prim: Primitive):
    return _register(jvp_rules, prim)
