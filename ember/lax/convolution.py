"""lax's convolutions: `conv_general_dilated` (one primitive) and the wrappers JAX builds on it
(`conv`, `conv_with_general_padding`, `conv_transpose`), with JAX's argument handling: dimension
numbers from layout strings ("NCHW", "OIHW", "NHWC", "HWIO", ...) or ConvDimensionNumbers, and
"SAME"/"SAME_LOWER"/"VALID" padding resolved from the shapes as `padtype_to_pads`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from ember.errors import ArgumentValueError, DTypeError, ShapeError, user_location
from ember.lax.layout import as_operand, dtype_of
from ember.tracer import dtypes
from ember.tracer import prims as P
from ember.tracer.prims.conv import dilate_dim
from ember.tracer.prims.util import shape_of


class ConvDimensionNumbers(NamedTuple):
    """The axes of (batch, feature, spatial...) of lhs and out and (out feature, in feature,
    spatial...) of rhs, as positions: JAX's canonical dimension numbers."""

    lhs_spec: tuple[int, ...]
    rhs_spec: tuple[int, ...]
    out_spec: tuple[int, ...]


def conv_general_permutations(dimension_numbers) -> tuple[tuple[int, ...], ...]:
    """The (lhs, rhs, out) permutations of layout strings: spatial axes in the order rhs names them."""
    lhs_spec, rhs_spec, out_spec = dimension_numbers
    charpairs = (("N", "C"), ("O", "I"), ("N", "C"))
    for i, (a, b) in enumerate(charpairs):
        spec = dimension_numbers[i]
        if not spec.count(a) == spec.count(b) == 1:
            raise ShapeError(f"convolution dimension_numbers[{i}] must contain the characters '{a}' and '{b}' "
                             f"exactly once, got {spec}.", user_location())
        if len(spec) != len(set(spec)):
            raise ShapeError(f"convolution dimension_numbers[{i}] cannot have duplicate characters, got {spec}.",
                             user_location())
    if not set(lhs_spec) - {"N", "C"} == set(rhs_spec) - {"O", "I"} == set(out_spec) - {"N", "C"}:
        raise ShapeError("convolution dimension_numbers elements must each have the same set of spatial "
                         f"characters, got {tuple(dimension_numbers)}.", user_location())

    def perm(spec, pair):
        spatial = [i for i, c in enumerate(spec) if c not in pair]
        if spec is not rhs_spec:
            spatial.sort(key=lambda i: rhs_spec.index(spec[i]))
        return (spec.index(pair[0]), spec.index(pair[1])) + tuple(spatial)

    return tuple(perm(spec, pair) for spec, pair in zip(dimension_numbers, charpairs))


def conv_dimension_numbers(lhs_shape, rhs_shape, dimension_numbers) -> ConvDimensionNumbers:
    """`dimension_numbers` (None: NCHW/OIHW/NCHW, layout strings, or ConvDimensionNumbers) canonical."""
    if isinstance(dimension_numbers, ConvDimensionNumbers):
        return dimension_numbers
    if len(lhs_shape) != len(rhs_shape):
        raise ShapeError(f"convolution requires lhs and rhs ndim to be equal, got {len(lhs_shape)} and "
                         f"{len(rhs_shape)}.", user_location())
    if dimension_numbers is None:
        iota = tuple(range(len(lhs_shape)))
        return ConvDimensionNumbers(iota, iota, iota)
    if not isinstance(dimension_numbers, (list, tuple)):
        raise ShapeError(f"convolution dimension_numbers must be tuple/list or None, got {type(dimension_numbers)}.",
                         user_location())
    if len(dimension_numbers) != 3:
        raise ShapeError(f"convolution dimension_numbers list/tuple must be length 3, got {len(dimension_numbers)}.",
                         user_location())
    if all(isinstance(s, (tuple, list)) for s in dimension_numbers):  # (lhs_spec, rhs_spec, out_spec) as ints
        return ConvDimensionNumbers(*(tuple(int(d) for d in s) for s in dimension_numbers))
    if not all(isinstance(s, str) for s in dimension_numbers):
        raise ShapeError("convolution dimension_numbers elements must be strings, got "
                         f"{tuple(map(type, dimension_numbers))}.", user_location())
    for i, spec in enumerate(dimension_numbers):
        if len(spec) != len(lhs_shape):
            raise ShapeError(f"convolution dimension_numbers[{i}] must have len equal to the ndim of lhs and rhs, "
                             f"got {len(spec)} for lhs and rhs shapes {tuple(lhs_shape)} and {tuple(rhs_shape)}.",
                             user_location())
    return ConvDimensionNumbers(*conv_general_permutations(dimension_numbers))


_PADDINGS = ("SAME", "SAME_LOWER", "VALID")


def padtype_to_pads(in_shape, window_shape, window_strides, padding: str) -> list[tuple[int, int]]:
    """(lo, hi) per spatial axis for "SAME" (output size ceil(in / stride), an odd total's extra
    element at the end), "SAME_LOWER" (at the start) or "VALID" (none)."""
    kind = padding.upper() if isinstance(padding, str) else padding
    if kind not in _PADDINGS:
        raise RuntimeError(f"Unrecognized padding type: expected 'VALID', 'SAME', or 'SAME_LOWER', got {padding}. "
                           f"(at {user_location()})")
    if kind == "VALID":
        return [(0, 0)] * len(in_shape)
    pads = []
    for n, k, s in zip(in_shape, window_shape, window_strides):
        total = max((-(-n // s) - 1) * s + k - n, 0)
        small, big = total // 2, total - total // 2
        pads.append((small, big) if kind == "SAME" else (big, small))
    return pads


def _operands(name: str, lhs, rhs, preferred_element_type):
    """Both operands of one dtype (converted to `preferred_element_type` when given), as lax demands."""
    lhs, rhs = as_operand(lhs), as_operand(rhs)
    a, b = dtypes.canonicalize(dtype_of(lhs)), dtypes.canonicalize(dtype_of(rhs))
    if a != b:
        raise DTypeError(f"lax.{name} requires arguments to have the same dtypes, got {a.name}, {b.name}.",
                         user_location())
    if preferred_element_type is not None:
        dt = dtypes.canonicalize(np.dtype(preferred_element_type))
        lhs = lhs if a == dt else P.convert_element_type(lhs, dt)
        rhs = rhs if b == dt else P.convert_element_type(rhs, dt)
    return lhs, rhs


def _explicit(padding) -> tuple[tuple[int, int], ...]:
    try:
        return tuple((int(lo), int(hi)) for lo, hi in padding)
    except (ValueError, TypeError) as e:
        raise ArgumentValueError("padding argument to conv_general_dilated should be a string or a sequence of "
                                 f"(low, high) pairs, got {padding}", user_location()) from e


def conv_general_dilated(lhs, rhs, window_strides: Sequence[int], padding: str | Sequence[tuple[int, int]],
                         lhs_dilation: Sequence[int] | None = None, rhs_dilation: Sequence[int] | None = None,
                         dimension_numbers=None, feature_group_count: int = 1, batch_group_count: int = 1,
                         precision=None, preferred_element_type=None):
    """General n-d convolution with strides, padding, lhs (transposed) and rhs (atrous) dilation,
    layouts and feature/batch groups, as jax.lax.conv_general_dilated."""
    lhs, rhs = _operands("conv_general_dilated", lhs, rhs, preferred_element_type)
    ls, rs = shape_of(lhs), shape_of(rhs)
    dn = conv_dimension_numbers(ls, rs, dimension_numbers)
    n_sp = len(ls) - 2
    lhs_dilation = (1,) * n_sp if lhs_dilation is None else tuple(lhs_dilation)
    rhs_dilation = (1,) * n_sp if rhs_dilation is None else tuple(rhs_dilation)
    if isinstance(padding, str):
        if any(d != 1 for d in lhs_dilation):
            raise ArgumentValueError("String padding is not implemented for transposed convolution using this op. "
                                     "Please either exactly specify the required padding or use conv_transpose.",
                                     user_location())
        window = [dilate_dim(rs[d], r) for d, r in zip(dn.rhs_spec[2:], rhs_dilation)]
        padding = padtype_to_pads([ls[d] for d in dn.lhs_spec[2:]], window, window_strides, padding)
    return P.conv_general_dilated(lhs, rhs, window_strides=tuple(window_strides), padding=_explicit(padding),
                                  lhs_dilation=lhs_dilation, rhs_dilation=rhs_dilation, dimension_numbers=tuple(dn),
                                  feature_group_count=feature_group_count, batch_group_count=batch_group_count)


def conv(lhs, rhs, window_strides: Sequence[int], padding: str, precision=None, preferred_element_type=None):
    """conv_general_dilated in the NCHW/OIHW layout with no dilation or groups."""
    return conv_general_dilated(lhs, rhs, window_strides, padding, precision=precision,
                                preferred_element_type=preferred_element_type)


def conv_with_general_padding(lhs, rhs, window_strides: Sequence[int], padding, lhs_dilation, rhs_dilation,
                              precision=None, preferred_element_type=None):
    """conv_general_dilated in the NCHW/OIHW layout, with dilations."""
    return conv_general_dilated(lhs, rhs, window_strides, padding, lhs_dilation=lhs_dilation,
                                rhs_dilation=rhs_dilation, precision=precision,
                                preferred_element_type=preferred_element_type)


def _conv_transpose_padding(k: int, s: int, padding) -> tuple[int, int]:
    """(lo, hi) of the fractionally strided convolution transposing a forward one padded `padding`."""
    if padding == "SAME":
        total = k + s - 2
        lo = k - 1 if s > k - 1 else -(-total // 2)
    elif padding == "VALID":
        total = k + s - 2 + max(k - s, 0)
        lo = k - 1
    elif isinstance(padding, tuple):
        pads = tuple(k - p - 1 for p in padding)
        lo, total = pads[0], sum(pads)
    else:
        raise ArgumentValueError(f"Invalid padding mode: {padding}", user_location())
    return lo, total - lo


_TRANSPOSE_LAYOUTS = {2: ("NC", "IO", "NC"), 3: ("NHC", "HIO", "NHC"), 4: ("NHWC", "HWIO", "NHWC"),
                      5: ("NHWDC", "HWDIO", "NHWDC")}


def conv_transpose(lhs, rhs, strides: Sequence[int], padding, rhs_dilation: Sequence[int] | None = None,
                   dimension_numbers=None, transpose_kernel: bool = False, precision=None,
                   preferred_element_type=None, use_consistent_padding: bool = False):
    """The "transposed" convolution (lhs dilated by `strides`), TensorFlow's layout by default; with
    `transpose_kernel` the kernel is flipped and its in/out features swapped (Keras' Conv2DTranspose)."""
    ls, rs = shape_of(lhs), shape_of(rhs)
    if len(ls) != len(rs) or len(ls) < 2:
        raise ShapeError(f"conv_transpose needs operands of one rank, 2 or more, got {ls} and {rs}", user_location())
    if dimension_numbers is None:
        if len(ls) not in _TRANSPOSE_LAYOUTS:
            raise ArgumentValueError("No 4+ dimensional dimension_number defaults.", user_location())
        dimension_numbers = _TRANSPOSE_LAYOUTS[len(ls)]
    dn = conv_dimension_numbers(ls, rs, dimension_numbers)
    k_spatial = [rs[d] for d in dn.rhs_spec[2:]]
    rhs_dilation = (1,) * (len(rs) - 2) if rhs_dilation is None else tuple(rhs_dilation)
    if use_consistent_padding or (isinstance(padding, str) and padding in ("SAME", "VALID")):
        per_axis = [padding] * len(strides) if isinstance(padding, str) else [tuple(p) for p in padding]
        pads = tuple(_conv_transpose_padding(dilate_dim(k, r), s, p)
                     for k, r, s, p in zip(k_spatial, rhs_dilation, strides, per_axis))
    else:
        pads = padding
    if transpose_kernel:
        rhs = P.rev(as_operand(rhs), dn.rhs_spec[2:])
        perm = list(range(len(rs)))
        perm[dn.rhs_spec[0]], perm[dn.rhs_spec[1]] = perm[dn.rhs_spec[1]], perm[dn.rhs_spec[0]]
        rhs = P.transpose(rhs, perm)
    return conv_general_dilated(lhs, rhs, (1,) * (len(ls) - 2), pads, strides, rhs_dilation, dn,
                                precision=precision, preferred_element_type=preferred_element_type)
