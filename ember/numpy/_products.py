"""Products: matmul, dot, vdot, inner, outer, tensordot and einsum, all lowered to one dot_general
(plus layout ops) so later passes see a single contraction."""

from __future__ import annotations

import math
import string

import numpy as np

from ember.errors import IncompatibleShapesError, ShapeError, user_location
from ember.numpy._core import (
    asarray,
    broadcast_shapes,
    dtype_weak,
    is_scalar,
    normalize_axis,
    to_dtype,
    to_result_type,
)
from ember.numpy._math import multiply
from ember.tracer import dtypes
from ember.tracer import prims as P


def _promote_pair(a, b):
    """Both operands as arrays of their common dtype and weak type (a Python scalar is weak, so
    dot(2.0, x_f16) is float16); bools are counted in int32 (see `_bool_result`)."""
    target, weak = dtypes.result_type(dtype_weak(a), dtype_weak(b))
    if dtypes.is_bool(target):
        target = dtypes.int_
    return tuple(asarray(x, target) if is_scalar(x) or isinstance(x, (list, tuple)) else
                 to_result_type(asarray(x), target, weak) for x in (a, b))


def _bool_result(out, *operands):
    """Products of bools are bools (any of the ANDed pairs holds), as in NumPy."""
    if all(dtypes.is_bool(dtype_weak(x)[0]) for x in operands):
        return P.ne(out, 0)
    return out


def _products(fn):
    """Wrap a product of two operands so that bool operands give a bool result."""

    def wrapper(a, b, *args, **kwargs):
        a, b = (x if is_scalar(x) else asarray(x) for x in (a, b))  # Python scalars stay weak
        return _bool_result(fn(a, b, *args, **kwargs), a, b)

    wrapper.__name__, wrapper.__doc__, wrapper.__wrapped__ = fn.__name__, fn.__doc__, fn
    return wrapper


def _mismatch(name, a, b, ax_a, ax_b):
    raise ShapeError(f"{name}: operand shapes {a.shape} and {b.shape} do not align (axis {ax_a} of the "
                     f"first has size {a.shape[ax_a]}, axis {ax_b} of the second has {b.shape[ax_b]})",
                     user_location())


@_products
def matmul(a, b):
    """Matrix product with NumPy's rules: 1-D operands are promoted, batch axes broadcast."""
    a, b = _promote_pair(a, b)
    if len(a.shape) == 0 or len(b.shape) == 0:
        raise IncompatibleShapesError("matmul: operands must not be 0-d (use multiply or *)", user_location())
    na, nb = len(a.shape), len(b.shape)
    ax_b = 0 if nb == 1 else nb - 2
    if a.shape[-1] != b.shape[ax_b]:
        _mismatch("matmul", a, b, na - 1, ax_b)
    if na == 1 or nb <= 2:
        # A vector operand, or weights without batch axes: one contraction of a's last axis with
        # b's contracting axis gives NumPy's result layout directly (no reshape, no broadcast of b).
        return P.dot_general(a, b, (((na - 1,), (ax_b,)), ((), ())))
    if na == 2:
        out = P.dot_general(a, b, (((1,), (nb - 2,)), ((), ())))  # (n, batch..., m)
        return P.transpose(out, tuple(range(1, nb - 1)) + (0, nb - 1))
    batch = broadcast_shapes(a.shape[:-2], b.shape[:-2], name="matmul")
    a = P.broadcast_to(a, batch + a.shape[-2:])
    b = P.broadcast_to(b, batch + b.shape[-2:])
    k = len(batch)
    return P.dot_general(a, b, (((k + 1,), (k,)), (tuple(range(k)), tuple(range(k)))))


matmul.product = True  # the eager path's product lanes (ember/numpy/_eager.py)


@_products
def dot(a, b):
    """numpy.dot: products of scalars, inner products of vectors, sum over a's last and b's
    second-to-last axis otherwise."""
    a, b = _promote_pair(a, b)
    if len(a.shape) == 0 or len(b.shape) == 0:
        return multiply(a, b)
    ax_b = 0 if len(b.shape) == 1 else len(b.shape) - 2
    if a.shape[-1] != b.shape[ax_b]:
        _mismatch("dot", a, b, len(a.shape) - 1, ax_b)
    return P.dot_general(a, b, (((len(a.shape) - 1,), (ax_b,)), ((), ())))


dot.product = True  # np.dot is jnp.dot for operands of one or two axes: a product lane, as matmul's


@_products
def inner(a, b):
    """Sum over the last axes of both operands (a scalar operand multiplies)."""
    a, b = _promote_pair(a, b)
    return _inner(a, b, "inner")


def _inner(a, b, name):
    if len(a.shape) == 0 or len(b.shape) == 0:
        return multiply(a, b)
    if a.shape[-1] != b.shape[-1]:
        _mismatch(name, a, b, len(a.shape) - 1, len(b.shape) - 1)
    return P.dot_general(a, b, (((len(a.shape) - 1,), (len(b.shape) - 1,)), ((), ())))


@_products
def vdot(a, b):
    """The dot product of the flattened operands."""
    a, b = _promote_pair(a, b)
    if math.prod(a.shape) != math.prod(b.shape):
        raise ShapeError(f"vdot: operands of shapes {a.shape} and {b.shape} have different sizes "
                         f"({math.prod(a.shape)} and {math.prod(b.shape)})", user_location())
    a = P.reshape(a, (math.prod(a.shape),))
    b = P.reshape(b, (math.prod(b.shape),))
    return _inner(a, b, "vdot")


@_products
def outer(a, b):
    """out[i, j] = a.ravel()[i] * b.ravel()[j]."""
    a, b = _promote_pair(a, b)
    a = P.reshape(a, (math.prod(a.shape),))
    b = P.reshape(b, (math.prod(b.shape),))
    return P.dot_general(a, b, (((), ()), ((), ())))


@_products
def tensordot(a, b, axes=2):
    """Sum over the last `axes` axes of a and the first of b, or over the given pairs of axes."""
    a, b = _promote_pair(a, b)
    if isinstance(axes, (int, np.integer)):
        n = int(axes)
        ax_a = tuple(range(len(a.shape) - n, len(a.shape)))
        ax_b = tuple(range(n))
    else:
        ax_a, ax_b = axes
        ax_a = (ax_a,) if isinstance(ax_a, int) else tuple(ax_a)
        ax_b = (ax_b,) if isinstance(ax_b, int) else tuple(ax_b)
    ax_a = tuple(normalize_axis(x, len(a.shape), "tensordot") for x in ax_a)
    ax_b = tuple(normalize_axis(x, len(b.shape), "tensordot") for x in ax_b)
    if len(ax_a) != len(ax_b):
        raise ShapeError("tensordot: the two axes lists must have the same length", user_location())
    for i, j in zip(ax_a, ax_b):
        if a.shape[i] != b.shape[j]:
            _mismatch("tensordot", a, b, i, j)
    return P.dot_general(a, b, ((ax_a, ax_b), ((), ())))


# --- einsum ---------------------------------------------------------------------------------------

def _parse(subscripts: str, shapes):
    subscripts = subscripts.replace(" ", "")
    if "->" in subscripts:
        ins, out = subscripts.split("->")
        explicit = True
    else:
        ins, out, explicit = subscripts, None, False
    in_specs = ins.split(",")
    if len(in_specs) != len(shapes):
        raise IncompatibleShapesError(f"einsum: {len(in_specs)} operand specs in {subscripts!r} for {len(shapes)} "
                                      "operands",
                         user_location())
    used = set(c for c in subscripts if c.isalpha())
    spare = [c for c in string.ascii_letters if c not in used]
    ell_nd = 0
    for spec, shape in zip(in_specs, shapes):
        if "..." in spec:
            ell_nd = max(ell_nd, len(shape) - (len(spec) - 3))
    ell = spare[:ell_nd]
    labels = []
    for spec, shape in zip(in_specs, shapes):
        if "..." in spec:
            pre, post = spec.split("...")
            n = len(shape) - len(pre) - len(post)
            lab = list(pre) + ell[ell_nd - n:] + list(post)
        else:
            lab = list(spec)
        if not all(c.isalpha() for c in lab) or len(lab) != len(shape):
            raise IncompatibleShapesError(f"einsum: spec {spec!r} does not fit an operand of shape {tuple(shape)}",
                             user_location())
        labels.append(lab)
    if explicit:
        if "..." in out:
            pre, post = out.split("...")
            out_labels = list(pre) + ell + list(post)
        else:
            out_labels = list(out)
    else:
        counts = {}
        for lab in labels:
            for c in lab:
                counts[c] = counts.get(c, 0) + 1
        out_labels = ell + sorted(c for c, k in counts.items() if k == 1 and c not in ell)
    if len(set(out_labels)) != len(out_labels):
        raise IncompatibleShapesError(f"einsum: output subscript {''.join(out_labels)!r} repeats a label",
                                      user_location())
    for c in out_labels:
        if not any(c in lab for lab in labels):
            raise IncompatibleShapesError(f"einsum: output label {c!r} appears in no operand", user_location())
    return labels, out_labels


def _diagonal(x, labels):
    """Fold repeated labels of one operand into one axis (its diagonal), via gather."""
    while True:
        dup = next((c for c in labels if labels.count(c) > 1), None)
        if dup is None:
            return x, labels
        pos = [i for i, c in enumerate(labels) if c == dup]
        sizes = {x.shape[i] for i in pos}
        if len(sizes) != 1:
            raise IncompatibleShapesError(f"einsum: label {dup!r} has sizes {sorted(sizes)} in one operand of shape "
                             f"{tuple(x.shape)}", user_location())
        n = sizes.pop()
        rest = [i for i in range(len(labels)) if i not in pos]
        x = P.transpose(x, tuple(pos) + tuple(rest))
        idx = np.repeat(np.arange(n, dtype=np.int32)[:, None], len(pos), axis=1)
        x = P.gather(x, idx)  # (n, rest...)
        labels = [dup] + [labels[i] for i in rest]


def _sum_out(x, labels, keep):
    axes = tuple(i for i, c in enumerate(labels) if c not in keep)
    if axes:
        x = P.reduce_sum(x, axes)
        labels = [c for c in labels if c in keep]
    return x, labels


def einsum(subscripts: str, *operands):
    """Einstein summation (batch axes, diagonals, ellipses, implicit output) over any number of operands:
    one dot_general per pair, contracted in the order opt_einsum.contract_path picks."""
    if not operands:
        raise IncompatibleShapesError("einsum: needs at least one operand", user_location())
    originals = [asarray(o) for o in operands]
    ops = _promote_all(originals)
    labels, out_labels = _parse(subscripts, [o.shape for o in ops])
    ops_labels = [_diagonal(o, list(lab)) for o, lab in zip(ops, labels)]
    if len(ops) == 1:
        (x, lab), = ops_labels
        x, lab = _sum_out(x, lab, set(out_labels))
        return _bool_result(P.transpose(x, tuple(lab.index(c) for c in out_labels)), *originals)
    x, lab = _contract_all(ops_labels, out_labels)
    return _bool_result(P.transpose(x, tuple(lab.index(c) for c in out_labels)), *originals)


def _promote_all(arrays):
    """All operands in their common dtype; bools are counted in int32 (see `_bool_result`)."""
    target, _ = dtypes.result_type(*(dtype_weak(a) for a in arrays))
    if dtypes.is_bool(target):
        target = dtypes.int_
    return [to_dtype(a, target) for a in arrays]


def _contract_all(ops_labels, out_labels):
    """Contract (operand, labels) pairs in opt_einsum's order; each intermediate keeps only the labels
    still needed by the remaining operands or the output."""
    import opt_einsum

    sizes = {}
    for x, lab in ops_labels:
        for c, d in zip(lab, x.shape):
            sizes[c] = max(sizes.get(c, 1), d)  # size-1 axes broadcast
    expr = ",".join("".join(lab) for _, lab in ops_labels) + "->" + "".join(out_labels)
    shapes = [tuple(sizes[c] for c in lab) for _, lab in ops_labels]
    path, _ = opt_einsum.contract_path(expr, *shapes, shapes=True, optimize="auto")
    pending = list(ops_labels)
    for step in path:
        picked = [pending[i] for i in step]
        pending = [p for i, p in enumerate(pending) if i not in step]
        needed = set(out_labels).union(*(lab for _, lab in pending))
        if len(picked) == 1:
            pending.append(_sum_out(*picked[0], needed))
            continue
        acc = picked[0]
        for k, nxt in enumerate(picked[1:], 2):
            later = needed.union(*(lab for _, lab in picked[k:]))
            keep = [c for c in dict.fromkeys(acc[1] + nxt[1]) if c in later]
            acc = (_contract(acc, nxt, keep, [acc[0].shape, nxt[0].shape]), keep)
        pending.append(acc)
    (x, lab), = pending
    return x, lab


def _contract(a_labels, b_labels, out_labels, shapes):
    """The two-operand einsum after diagonals: sum out private labels, then one dot_general."""
    (a, la), (b, lb) = a_labels, b_labels
    a, la = _sum_out(a, la, set(lb) | set(out_labels))
    b, lb = _sum_out(b, lb, set(la) | set(out_labels))
    common = [c for c in la if c in lb]
    for c in common:  # size-1 axes broadcast (as in ellipsis broadcasting)
        sa, sb = a.shape[la.index(c)], b.shape[lb.index(c)]
        if sa != sb:
            if sa == 1:
                a = P.broadcast_in_dim(a, tuple(sb if l == c else a.shape[i] for i, l in enumerate(la)),
                                       tuple(range(len(la))))
            elif sb == 1:
                b = P.broadcast_in_dim(b, tuple(sa if l == c else b.shape[i] for i, l in enumerate(lb)),
                                       tuple(range(len(lb))))
            else:
                raise IncompatibleShapesError(f"einsum: label {c!r} has size {sa} in the first operand (shape "
                                 f"{tuple(shapes[0])}) and {sb} in the second (shape {tuple(shapes[1])})",
                                 user_location())
    batch = [c for c in common if c in out_labels]
    contract = [c for c in common if c not in out_labels]
    dn = ((tuple(la.index(c) for c in contract), tuple(lb.index(c) for c in contract)),
          (tuple(la.index(c) for c in batch), tuple(lb.index(c) for c in batch)))
    out = P.dot_general(a, b, dn)
    res_labels = batch + [c for c in la if c not in common] + [c for c in lb if c not in common]
    return P.transpose(out, tuple(res_labels.index(c) for c in out_labels))
