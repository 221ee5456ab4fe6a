"""NumPy indexing on arrays and tracers: `x[key]`, `take`, and JAX's functional `x.at[key].set/add`.

Basic indices (ints, slices, None, Ellipsis) become `slice`/`rev`/`reshape`; integer arrays (and
ints mixed with them) become one `gather`, placed where NumPy puts advanced-index axes. Concrete
indices are bounds-checked (IndexError); traced ones wrap negatives once, then reads clamp and writes
(`x.at[i].set/add`) drop out-of-bounds updates, as in JAX.
"""

from __future__ import annotations

import math

import numpy as np

from ember.errors import (
    AxisError,
    DTypeError,
    IncompatibleShapesError,
    IndexingError,
    NonConcreteBooleanIndexError,
    user_location,
)
from ember.numpy import _native
from ember.numpy._core import asarray, broadcast_shapes, shape_of
from ember.tracer import dtypes
from ember.tracer import prims as P
from ember.tracer.array import Array
from ember.tracer.trace import Tracer, is_tracing, trace_state


def _is_int_scalar(k) -> bool:
    return isinstance(k, (int, np.integer)) and not isinstance(k, (bool, np.bool_))


class _Mask:
    """A concrete boolean mask in a key: it becomes integer arrays once the axes it covers are known."""

    __slots__ = ("mask",)

    def __init__(self, mask: np.ndarray):
        self.mask = mask


def _normalize_key(key, shape: tuple[int, ...]) -> list:
    """Key entries as ints, slices, None or integer arrays, with Ellipsis expanded and concrete
    boolean masks turned into integer arrays. An Ellipsis that expands to no axis is kept (it consumes
    none), because NumPy's placement of advanced-index axes depends on it."""
    ndim = len(shape)
    key = list(key) if isinstance(key, tuple) else [key]
    items = []
    for k in key:
        if isinstance(k, (list, tuple)):
            if any(isinstance(e, Tracer) for e in k):
                k = asarray(k)
            else:
                k = np.asarray(k)
                k = k.astype(np.int32) if k.size == 0 and k.dtype.kind == "f" else k  # [] is an empty index
        if isinstance(k, np.ndarray) and k.dtype == np.bool_ and k.ndim:
            items.append(_Mask(k))
            continue
        if isinstance(k, Tracer) and dtypes.is_bool(k.dtype):
            raise NonConcreteBooleanIndexError(
                "indexing with a traced boolean mask gives a result whose shape depends on the data, "
                "which ember cannot trace; use ember.numpy.where(mask, x, 0) (or a concrete NumPy mask)",
                user_location())
        if isinstance(k, (bool, np.bool_)) or (isinstance(k, np.ndarray) and k.dtype == np.bool_):
            raise IndexingError("boolean scalars are not supported as indices", user_location())
        if isinstance(k, (Tracer, np.ndarray)) and not dtypes.is_int(k.dtype):
            raise DTypeError(f"arrays used as indices must be of integer type, got {k.dtype}", user_location())
        if not (_is_int_scalar(k) or k is None or k is Ellipsis or isinstance(k, (slice, Tracer, np.ndarray))):
            raise DTypeError(f"only integers, slices, None, Ellipsis and integer arrays are valid indices; "
                             f"got {type(k).__name__}", user_location())
        items.append(k)
    n_ell = sum(1 for k in items if k is Ellipsis)
    if n_ell > 1:
        raise IndexingError("an index can only have a single ellipsis ('...')", user_location())
    consumed = sum(k.mask.ndim if isinstance(k, _Mask) else 1 for k in items if k is not None and k is not Ellipsis)
    if consumed > ndim:
        raise IndexingError(f"too many indices for array: array is {ndim}-dimensional, but {consumed} were "
                            "indexed", user_location())
    if n_ell:
        # An Ellipsis that stands for no axis stays in the key: it still separates advanced indices.
        i = next(j for j, k in enumerate(items) if k is Ellipsis)  # not .index: == on arrays is elementwise
        items[i:i + 1] = [slice(None)] * (ndim - consumed) or [Ellipsis]
    else:
        items += [slice(None)] * (ndim - consumed)
    return _expand_masks(items, shape)


def _expand_masks(items: list, shape: tuple[int, ...]) -> list:
    """Boolean masks replaced by the integer arrays of their True positions, after checking that each
    mask has the shape of the axes it covers."""
    out, axis = [], 0
    for k in items:
        if isinstance(k, _Mask):
            covered = tuple(shape[axis:axis + k.mask.ndim])
            if covered != k.mask.shape:
                raise IndexingError(f"boolean index of shape {k.mask.shape} does not match the indexed axes "
                                    f"{axis}..{axis + k.mask.ndim - 1} of shape {covered}", user_location())
            out.extend(np.nonzero(k.mask))
            axis += k.mask.ndim
        else:
            out.append(k)
            axis += k is not None and k is not Ellipsis
    return out


def _check_int(i: int, dim: int, axis: int) -> int:
    if not -dim <= i < dim:
        raise IndexingError(f"index {i} is out of bounds for axis {axis} with size {dim}", user_location())
    return i % dim


def getitem(x, key):
    """x[key] with NumPy semantics."""
    x = asarray(x)
    items = _normalize_key(key, tuple(x.shape))
    # Next to an integer array an integer counts as a 0-d one: it takes part in the placement of
    # the advanced axes (x[1, :, [0, 2]] puts them first, as NumPy does). The advanced axes stay in
    # place only if their entries are adjacent in the key: a slice, None or Ellipsis between them (even
    # an Ellipsis that stands for no axis) sends them to the front.
    arrays = [isinstance(k, (Tracer, np.ndarray)) for k in items]
    adv_pos = [i for i, k in enumerate(items) if arrays[i] or _is_int_scalar(k)] if any(arrays) else []
    adjacent = adv_pos == list(range(adv_pos[0], adv_pos[-1] + 1)) if adv_pos else True
    items = [k for k in items if k is not Ellipsis]
    # None inserts a unit axis; afterwards every entry consumes exactly one axis.
    if any(k is None for k in items):
        it = iter(x.shape)
        x = P.reshape(x, tuple(1 if k is None else next(it) for k in items))
        items = [slice(None) if k is None else k for k in items]
    if not adv_pos:
        return _basic(x, items)
    is_adv = [isinstance(k, (Tracer, np.ndarray)) or _is_int_scalar(k) for k in items]
    return _advanced(x, items, is_adv, adjacent)


def _basic(x, items):
    start, limit, strides, flip, out_shape = [], [], [], [], []
    for axis, (k, dim) in enumerate(zip(items, x.shape)):
        if _is_int_scalar(k):
            i = _check_int(int(k), dim, axis)
            start.append(i)
            limit.append(i + 1)
            strides.append(1)
            continue
        lo, hi, step = k.indices(dim)
        r = range(lo, hi, step)
        n = len(r)
        if step > 0 or n == 0:
            s, l, st = (r.start, r.start + (n - 1) * step + 1, step) if n else (0, 0, 1)
        else:
            s, l, st = r[-1], r[0] + 1, -step
            flip.append(axis)
        start.append(s)
        limit.append(l)
        strides.append(st)
        out_shape.append(n)
    out = P.slice(x, start, limit, strides)
    out = P.rev(out, flip)
    return P.reshape(out, tuple(out_shape))


def _index_array(k, dim: int, axis: int):
    """An advanced index as an integer array with negative entries wrapped (and checked if concrete)."""
    if _is_int_scalar(k):
        return np.asarray(_check_int(int(k), dim, axis), dtype=np.int32)
    if isinstance(k, np.ndarray):
        if k.size and (k.min() < -dim or k.max() >= dim):
            bad = k[(k < -dim) | (k >= dim)].flat[0]
            raise IndexingError(f"index {bad} is out of bounds for axis {axis} with size {dim}", user_location())
        return np.where(k < 0, k + dim, k).astype(np.int64 if dim >= 2**31 else np.int32)
    if k.dtype.kind == "i":
        return P.select(P.lt(k, 0), P.add(k, dim), k)
    return k


def _advanced(x, items, is_adv, adjacent: bool):
    """x[items] for a key with advanced entries (`is_adv`), one entry per axis of x; their broadcast axes
    go where the first of them stands if they were `adjacent` in the key, else first."""
    # Slice (and flip) the non-advanced axes first; they keep their positions.
    basic_items = [slice(None) if a else k for k, a in zip(items, is_adv)]
    x = _basic(x, basic_items)
    adv_axes = [i for i, a in enumerate(is_adv) if a]
    idx = [_index_array(items[i], x.shape[i], i) for i in adv_axes]
    n_shape = broadcast_shapes(*(shape_of(i) for i in idx), name="indexing")
    itype = np.dtype(np.int64) if any(getattr(i, "dtype", None) == np.int64 for i in idx) else np.dtype(np.int32)
    cols = [P.reshape(P.broadcast_to(P.convert_element_type(i, itype), n_shape), n_shape + (1,)) for i in idx]
    indices = P.concatenate(cols, len(n_shape)) if len(cols) > 1 else cols[0]
    rest = [i for i in range(len(x.shape)) if i not in adv_axes]
    x = P.transpose(x, tuple(adv_axes) + tuple(rest))
    out = P.gather(x, indices)  # n_shape + rest
    if adjacent and adv_axes[0] > 0:
        nb, first = len(n_shape), adv_axes[0]
        perm = tuple(range(nb, nb + first)) + tuple(range(nb)) + tuple(range(nb + first, len(out.shape)))
        out = P.transpose(out, perm)
    return out


def take(a, indices, axis: int | None = None):
    """Elements of `a` at `indices` along `axis` (of the flattened array when None)."""
    a = asarray(a)
    if axis is None:
        a, axis = P.reshape(a, (math.prod(a.shape),)), 0
    nd = len(a.shape)
    if not -nd <= axis < nd:
        raise AxisError(f"take: axis {axis} is out of bounds for an array of dimension {nd}", user_location())
    axis %= nd
    if isinstance(indices, (int, np.integer)):
        indices = np.asarray(indices)
    key = (slice(None),) * axis + (indices,)
    return getitem(a, key)


# --- functional updates: x.at[key].set(v) ---------------------------------------------------------

def _has_tracer(key) -> bool:
    key = key if isinstance(key, tuple) else (key,)
    return any(isinstance(k, Tracer) or (isinstance(k, (list, tuple)) and _has_tracer(tuple(k))) for k in key)


def _flat_positions(shape, key):
    """The flat position in an array of `shape` of every element `x[key]` selects. With traced indices,
    an element whose index is out of bounds (after wrapping negatives once) gets position prod(shape):
    one past the end, so the scatter drops its update, as in JAX."""
    n = math.prod(shape)
    itype = np.int32 if n < 2**31 - 1 else np.int64
    if not _has_tracer(key):
        return np.arange(n, dtype=itype).reshape(shape)[key]
    items = _in_bounds_key(_normalize_key(key, shape), shape)
    pos = None
    stride = 1
    for axis in reversed(range(len(shape))):
        term = P.iota(itype, shape, axis)
        term = P.mul(term, stride) if stride != 1 else term
        pos = term if pos is None else P.add(pos, term)
        stride *= shape[axis]
    # One more entry on every axis, holding the past-the-end position that out-of-bounds indices select.
    pos = P.pad(pos, np.asarray(n, itype)[()], tuple((0, 1, 0) for _ in shape))
    return getitem(pos, tuple(items))


def _in_bounds_key(items: list, shape: tuple[int, ...]) -> list:
    """A normalized key for an array of `shape` rewritten to index the same elements of that array padded
    by one on every axis: concrete entries made non-negative, traced out-of-bounds indices sent to the pad."""
    out, axis = [], 0
    for k in items:
        if k is None or k is Ellipsis:
            out.append(k)
            continue
        dim = shape[axis]
        if _is_int_scalar(k):
            k = _check_int(int(k), dim, axis)
        elif isinstance(k, slice):
            lo, hi, step = k.indices(dim)
            k = slice(lo, hi if hi >= 0 else None, step)
        elif isinstance(k, np.ndarray):
            k = _index_array(k, dim, axis)
        else:
            k = _index_array(k, dim, axis)
            k = P.select(P.and_(P.ge(k, 0), P.lt(k, dim)), k, P.full(shape_of(k), dim, k.dtype))
        out.append(k)
        axis += 1
    return out


_MODES = (None, "promise_in_bounds", "drop", "fill", "clip")


def _check_mode(mode, what: str) -> str | None:
    if mode not in _MODES:
        raise ValueError(f"at[...].{what}: mode={mode!r} is not one of {_MODES[1:]} (or None), as in JAX "
                         f"(at {user_location()})")
    return None if mode in ("promise_in_bounds", "drop", "fill") else mode


def _clipped_key(key, shape: tuple[int, ...]):
    """`key` with every integer index clamped into its axis (negative ones wrapped once first), as JAX's
    mode="clip"; slices, None and Ellipsis are unchanged."""
    out, axis = [], 0
    for k in _normalize_key(key, shape):
        if k is None or k is Ellipsis:
            out.append(k)
            continue
        dim = shape[axis]
        if _is_int_scalar(k):
            k = int(k)
            k = min(max(k + dim if k < 0 else k, 0), dim - 1)
        elif isinstance(k, (np.ndarray, Tracer)):
            k = asarray(k)
            k = P.select(P.lt(k, 0), P.add(k, dim), k)
            k = P.minimum(P.maximum(k, 0), dim - 1)
        out.append(k)
        axis += 1
    return tuple(out)


# x.at[...].<method>(v): the scatter primitive that combines repeated indices as JAX's does, and the
# NumPy ufunc whose ufunc.at is its reference (the eager path)
_SCATTERS = {"multiply": (P.scatter_mul, np.multiply), "min": (P.scatter_min, np.minimum),
             "max": (P.scatter_max, np.maximum)}


def _cannot_repeat(shape, key) -> bool:
    """Whether `key` is concrete and selects no element of an array of `shape` twice."""
    if _has_tracer(key):
        return False
    pos = np.asarray(_flat_positions(shape, key)).ravel()
    return len(np.unique(pos)) == len(pos)


class _IndexUpdateRef:
    """`x.at[key]`: JAX's functional updates. Repeated indices combine as in JAX: one of the values wins
    for set; add, multiply, min and max combine every occurrence (their scatter primitives; NumPy's
    ufunc.at on concrete arrays); divide and power divide by or raise to the product of the values, as
    JAX computes them; apply applies func once per occurrence. Out-of-bounds
    indices: dropped by an update and an error for a static one in get (mode None, "drop", "fill",
    "promise_in_bounds"), or clamped into the array (mode="clip")."""

    __slots__ = ("array", "key")

    def __init__(self, array, key):
        self.array, self.key = array, key

    def _key(self, mode, what: str):
        mode = _check_mode(mode, what)
        return _clipped_key(self.key, tuple(shape_of(self.array))) if mode == "clip" else self.key

    def get(self, *, indices_are_sorted: bool = False, unique_indices: bool = False, mode=None, fill_value=None):
        """x[key]."""
        x = self.array
        if mode == "fill" or fill_value is not None:
            return self._filled(fill_value)
        if (type(x) is Array or type(x) is np.ndarray) and not is_tracing() and static_key(self.key) is not None:
            try:
                return np.array(np.asarray(x)[self._key(mode, "get")]).view(Array)
            except IndexError:  # out of bounds: the full path's error
                pass
        return getitem(self.array, self._key(mode, "get"))

    def _filled(self, fill_value):
        """get(mode="fill"): x[key] where the index is in bounds, `fill_value` elsewhere (JAX's default:
        NaN for floats, the most negative int, the largest unsigned int, True), for a key that is one
        integer or integer array indexing the first axis."""
        from ember.numpy._math import where

        x = asarray(self.array)
        k = self.key
        if isinstance(k, tuple) or not (_is_int_scalar(k) or isinstance(k, (np.ndarray, Tracer, list))):
            raise NotImplementedError(f"at[...].get(mode='fill'): Ember fills for a key that is one integer or "
                                      f"integer array (on the first axis); got {k!r} (at {user_location()})")
        k = asarray(k)
        dim = x.shape[0]
        valid = P.and_(P.ge(k, -dim), P.lt(k, dim))
        got = getitem(x, _clipped_key(k, tuple(x.shape)))
        if fill_value is None:
            dt = x.dtype
            fill_value = (np.nan if dt.kind == "f" else np.iinfo(dt).min if dt.kind == "i"
                          else np.iinfo(dt).max if dt.kind == "u" else True)
        valid = P.reshape(valid, tuple(shape_of(valid)) + (1,) * (len(shape_of(got)) - len(shape_of(valid))))
        return where(valid, got, P.convert_element_type(asarray(fill_value), x.dtype))

    def set(self, values, *, indices_are_sorted: bool = False, unique_indices: bool = False, mode=None):
        """A copy of the array with x[key] = values (duplicated indices: one of the values wins)."""
        x, key = self.array, self.key
        if type(x) is Array and type(key) is int and type(values) is float and mode is None \
                and x.ndim == 1 and not trace_state.stack and x.dtype.kind in "fc":  # the commonest, in this frame
            out = _ndarray_copy(x)
            try:
                _plain_setitem(out, key, values)
                if x.dtype.kind == "f" and x.dtype.itemsize > 2:  # what the native tier serves
                    _native.hit()
                return out
            except IndexError:  # out of bounds: the full path raises Ember's IndexError
                pass
        out = self._fast("set", values, mode)
        return _update(self.array, self._key(mode, "set"), P.scatter, values) if out is None else out

    def add(self, values, *, indices_are_sorted: bool = False, unique_indices: bool = False, mode=None):
        """A copy of the array with values added at x[key] (duplicated indices accumulate)."""
        out = self._fast("add", values, mode)
        return _update(self.array, self._key(mode, "add"), P.scatter_add, values) if out is None else out

    def _fast(self, how: str, values, mode):
        """An eager update with a static key (ints, slices, None, Ellipsis: no index repeats) on a
        concrete array, done as NumPy does it on a copy; None where it cannot be, or where NumPy would
        do something else (a failed cast, an out-of-bounds index): the full path then runs."""
        x, key = self.array, self.key
        tx, tv = type(x), type(values)
        if not (tx is Array or tx is np.ndarray) or trace_state.stack or tv not in _VALUE_TYPES \
                or not (type(key) is int or static_key(key) is not None):
            return None
        try:
            if mode is not None:
                key = self._key(mode, how)
            # a copy that is an Array already (ndarray's copy keeps the subclass), written through a plain
            # view (an Array refuses item assignment; ndarray.__setitem__ on one drops a subarray's write)
            out = _ndarray_copy(x) if tx is Array else x.copy().view(Array)
            plain = out.view(np.ndarray)
            if tv is float or tv is int or tv is bool:  # NumPy's item assignment casts a Python scalar as
                v = values if out.dtype.kind in _SCALAR_KINDS[tv] else np.asarray(values, out.dtype)  # asarray
            else:
                v = np.asarray(values.view(np.ndarray) if tv is Array else values, dtype=out.dtype)
                if v.ndim and v.ndim > np.ndim(plain[key]):
                    return None
            if how == "set":
                plain[key] = v
            else:
                plain[key] += v  # (a static key: no index repeats)
            return out
        except (TypeError, ValueError, IndexError, OverflowError):
            return None

    def _combine(self, what: str, values, unique_indices: bool, mode, x=None):
        """x.at[key].<what>(values) for multiply, min and max, as JAX's `_scatter_update`: x and values
        promoted together, combined at x[key] (each repeat of an index in turn, by the scatter
        primitive), the result cast back to x's dtype. A key that cannot repeat (unique_indices=True,
        or concrete and repeat-free) is a set of the combined values, differentiable in both."""
        from ember.numpy._core import dtype_weak

        key = self._key(mode, what)
        x = asarray(self.array if x is None else x)
        prim, ufunc = _SCATTERS[what]
        dtype, _ = dtypes.result_type(dtype_weak(x), dtype_weak(values))
        if dtype == x.dtype and isinstance(x, np.ndarray) and not is_tracing() and not _has_tracer(key) \
                and not isinstance(values, Tracer):
            try:  # concrete: the scatter's own reference, NumPy's ufunc.at, on a copy
                pos = np.asarray(_flat_positions(x.shape, key))
                v = np.broadcast_to(np.asarray(np.asarray(values), dtype=x.dtype), pos.shape)
                out = np.array(x).reshape(-1)
                with np.errstate(invalid="ignore"):  # a NaN compared is a value here (see the primitive)
                    ufunc.at(out, pos.reshape(-1), v.reshape(-1))
                return out.reshape(x.shape).view(Array)
            except (ValueError, OverflowError):  # a shape or value the traced path words as ember does
                pass
        if unique_indices or _cannot_repeat(tuple(x.shape), key):
            return _update(x, key, P.scatter, ufunc_of(what)(getitem(x, key), values))
        wide = x if dtype == x.dtype else P.convert_element_type(x, dtype)
        out = _update(wide, key, prim, values)
        return out if dtype == x.dtype else P.convert_element_type(out, x.dtype)

    def multiply(self, values, *, indices_are_sorted: bool = False, unique_indices: bool = False, mode=None):
        """A copy of the array with x[key] *= values (a repeated index multiplies by each of its values)."""
        return self._combine("multiply", values, unique_indices, mode)

    mul = multiply

    def divide(self, values, *, indices_are_sorted: bool = False, unique_indices: bool = False, mode=None):
        """A copy of the array with x[key] /= values, as JAX: x / ones_like(x).at[key].multiply(values)
        (true division: an integer array gives floats)."""
        from ember.numpy._math import divide

        return divide(self.array, self._product_of_values(values, unique_indices, mode, "divide"))

    def power(self, values, *, indices_are_sorted: bool = False, unique_indices: bool = False, mode=None):
        """A copy of the array with x[key] **= values, as JAX: x ** ones_like(x).at[key].multiply(values)."""
        from ember.numpy._math import power

        return power(self.array, self._product_of_values(values, unique_indices, mode, "power"))

    def _product_of_values(self, values, unique_indices: bool, mode, what: str):
        """ones_like(x).at[key].multiply(values): at each element, the product of the values its
        occurrences in `key` bring (1 where none)."""
        from ember.numpy._creation import ones_like

        self._key(mode, what)  # the mode is checked in the name of the method called
        return self._combine("multiply", values, unique_indices, mode, x=ones_like(self.array))

    def min(self, values, *, indices_are_sorted: bool = False, unique_indices: bool = False, mode=None):
        """A copy of the array with x[key] = minimum(x[key], values) (NaN wins, as in JAX)."""
        return self._combine("min", values, unique_indices, mode)

    def max(self, values, *, indices_are_sorted: bool = False, unique_indices: bool = False, mode=None):
        """A copy of the array with x[key] = maximum(x[key], values) (NaN wins, as in JAX)."""
        return self._combine("max", values, unique_indices, mode)

    def apply(self, func, *, indices_are_sorted: bool = False, unique_indices: bool = False, mode=None):
        """A copy of the array with x[key] = func(x[key]) (func elementwise, as JAX requires); an index
        that repeats gets func once per occurrence, as in JAX."""
        key = self._key(mode, "apply")
        x = asarray(self.array)
        if isinstance(x, np.ndarray) and not is_tracing() and not _has_tracer(key):
            pos = np.asarray(_flat_positions(x.shape, key)).reshape(-1)
            counts = np.bincount(pos, minlength=x.size) if pos.size else np.zeros(x.size, np.int64)
            out = np.array(x).reshape(-1)
            for r in range(1, int(counts.max(initial=0)) + 1):
                chosen = counts >= r
                out[chosen] = np.asarray(func(out[chosen].view(Array)))
            return out.reshape(x.shape).view(Array)
        if unique_indices or _cannot_repeat(tuple(x.shape), key):  # func of the selected elements only
            return _update(x, key, P.scatter, func(getitem(x, key)))
        if _has_tracer(key):
            return _apply_traced(x, key, func)
        pos = np.asarray(_flat_positions(x.shape, key)).reshape(-1)
        counts = np.bincount(pos, minlength=x.size).reshape(x.shape)
        for r in range(int(counts.max(initial=0))):  # known counts: func applied once more where due
            x = _where_due(counts > r, func, x)
        return x


# the array kinds a Python scalar of each type is assigned into exactly as np.asarray(value, dtype) casts it
_SCALAR_KINDS = {float: "fc", int: "fciu", bool: "fciub"}
_ndarray_copy = np.ndarray.copy
_plain_setitem = np.ndarray.__setitem__  # (on an Array of one axis: an int key is one element, never a subarray,
# whose write ndarray.__setitem__ on an Array would drop)
_VALUE_TYPES = frozenset({int, float, bool, np.ndarray, Array, np.float16, np.float32, np.float64, np.int8, np.int16,
                          np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64, np.bool_})


def static_key(key):
    """`key` in a hashable form if it holds only ints, slices of ints, None and Ellipsis, else None."""
    items = key if isinstance(key, tuple) else (key,)
    out = []
    for k in items:
        if k is None or k is Ellipsis or type(k) is int:
            out.append(k)
        elif type(k) is slice:
            a, b, c = k.start, k.stop, k.step  # (tested one by one: a generator costs more than the indexing)
            if not ((a is None or type(a) is int) and (b is None or type(b) is int) and (c is None or type(c) is int)):
                return None
            out.append(("slice", a, b, c))
        else:
            return None
    return isinstance(key, tuple), tuple(out)


def ufunc_of(what: str):
    """The ember.numpy function of an `.at` method: x[key] = f(x[key], values)."""
    from ember.numpy._math import maximum, minimum, multiply

    return {"multiply": multiply, "min": minimum, "max": maximum}[what]


def _where_due(due, func, x):
    """func(x) where `due`, x elsewhere, in x's dtype (func applied to every element, elementwise)."""
    return P.select(due, P.convert_element_type(asarray(func(x)), x.dtype), x)


def _apply_traced(x, key, func):
    """x.at[key].apply(func) for traced indices: how often each element is selected (a scatter_add
    of ones; out-of-bounds ones dropped), then func applied while some element is due once more
    (a while_loop: the largest count is only known at run time). Like JAX's, not differentiable."""
    from ember.lax import while_loop

    pos = _flat_positions(x.shape, key)
    m = math.prod(shape_of(pos))
    itype = np.dtype(np.int32)
    counts = P.scatter_add(P.full((math.prod(x.shape),), 0, itype), P.reshape(pos, (m, 1)), P.full((m,), 1, itype))
    counts = P.reshape(counts, tuple(x.shape))
    most = P.reduce_max(counts, tuple(range(len(x.shape)))) if x.shape else counts

    def more(carry):
        return P.lt(carry[0], most)

    def once(carry):
        r, y = carry
        return P.add(r, np.int32(1)), _where_due(P.gt(counts, r), func, y)

    return while_loop(more, once, (np.int32(0), x))[1]


def _update(x, key, prim_fn, values):
    """A copy of `x` with `values` (cast to x's dtype) scattered to x[key] by `prim_fn` (a scatter
    primitive)."""
    from ember.numpy._core import to_dtype

    x = asarray(x)
    pos = _flat_positions(x.shape, key)
    pos_shape = shape_of(pos)
    values = asarray(values) if not isinstance(values, (int, float, bool)) else values
    values = to_dtype(values, x.dtype)
    if len(shape_of(values)) > len(pos_shape) or broadcast_shapes(shape_of(values), pos_shape,
                                                                   name="at[].set") != pos_shape:
        raise IncompatibleShapesError(f"at[...]: values of shape {shape_of(values)} cannot be broadcast to the "
                         f"indexed shape {pos_shape}", user_location())
    values = P.broadcast_to(values, pos_shape) if shape_of(values) != pos_shape else values
    m = math.prod(pos_shape)
    flat_x = P.reshape(x, (math.prod(x.shape),))
    out = prim_fn(flat_x, P.reshape(pos, (m, 1)), P.reshape(values, (m,)))
    return P.reshape(out, x.shape)


class _IndexUpdateHelper:
    __slots__ = ("array",)

    def __init__(self, array):
        self.array = array

    def __getitem__(self, key):
        ref = _new(_IndexUpdateRef)  # (made without __init__'s Python call: `x.at[i].set(v)` is a hot path)
        ref.array, ref.key = self.array, key
        return ref


_new = object.__new__


def at(x) -> _IndexUpdateHelper:
    helper = _new(_IndexUpdateHelper)
    helper.array = x
    return helper

