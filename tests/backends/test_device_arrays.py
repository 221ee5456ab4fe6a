"""GPU arrays as jit and the checks see them, without a GPU: any object with `__cuda_array_interface__`
is one (CuPy is never imported for it), its memory span comes from its pointer, and `out=` arrays are
checked for shape, dtype, layout and overlap like ndarrays."""

import numpy as np
import pytest

from ember.api.tracing import leaf_aval, to_array
from ember.backends.device_arrays import DEVICE_TYPES, byte_span, is_device_array, overlap
from ember.backends.outputs import check_out
from ember.errors import ArgumentError, ArgumentValueError
from ember.tracer.aval import ShapedArray


class _Pointer:
    def __init__(self, ptr):
        self.ptr = ptr


class FakeDeviceArray:
    """A stand-in for a CuPy array: a pointer, a shape, a dtype, C-contiguous unless strides are given."""

    def __init__(self, ptr, shape, dtype=np.float32, strides=None):
        self.data, self.shape, self.dtype = _Pointer(ptr), tuple(shape), np.dtype(dtype)
        self.size = int(np.prod(shape, dtype=np.int64))
        self.nbytes = self.size * self.dtype.itemsize
        self._strides = strides
        self.flags = type("Flags", (), {"c_contiguous": strides is None})()

    @property
    def __cuda_array_interface__(self):
        return {"data": (self.data.ptr, False), "shape": self.shape, "typestr": self.dtype.str,
                "strides": self._strides, "version": 3}


def test_recognized_and_remembered_by_type():
    x = FakeDeviceArray(4096, (3,))
    assert is_device_array(x) and type(x) in DEVICE_TYPES
    assert not is_device_array(np.ones(3)) and np.ndarray not in DEVICE_TYPES


def test_aval_and_the_array_passed_as_it_is():
    x = FakeDeviceArray(4096, (2, 3), np.float64)
    assert leaf_aval(x) == ShapedArray((2, 3), np.dtype(np.float64))
    assert to_array(x) is x


def test_byte_span():
    assert byte_span(FakeDeviceArray(1024, (4, 4))) == (1024, 1024 + 64)
    transposed = FakeDeviceArray(1024, (4, 4), strides=(4, 16))
    assert byte_span(transposed) == (1024, 1024 + 64)
    reversed_ = FakeDeviceArray(1024 + 12, (4,), strides=(-4,))
    assert byte_span(reversed_) == (1024, 1024 + 16)
    flagged = FakeDeviceArray(1024, (4, 4))
    flagged._c_contiguous = True  # CuPy's own flag: the span is its bytes, read without the strides
    assert byte_span(flagged) == (1024, 1024 + 64)


def test_out_checks_overlap_and_layout():
    aval = ShapedArray((4,), np.dtype(np.float32))
    x = FakeDeviceArray(1024, (4,))
    assert check_out([FakeDeviceArray(2048, (4,))], [aval], [x])
    with pytest.raises(ArgumentValueError, match="shares memory with input 0"):
        check_out([FakeDeviceArray(1032, (4,))], [aval], [x])
    with pytest.raises(ArgumentValueError, match="another out array"):
        check_out([FakeDeviceArray(4096, (4,)), FakeDeviceArray(4100, (4,))], [aval, aval], [x])
    with pytest.raises(ArgumentValueError, match=r"has shape \(5,\).*cupy.empty"):
        check_out([FakeDeviceArray(2048, (5,))], [aval], [x])
    with pytest.raises(ArgumentValueError, match="not C-contiguous"):
        check_out([FakeDeviceArray(2048, (4,), strides=(8,))], [aval], [x])
    with pytest.raises(ArgumentError, match="has dtype float64"):
        check_out([FakeDeviceArray(2048, (4,), np.float64)], [aval], [x])


def test_overlap_of_strided_arrays():
    """An out array meeting a reversed input's memory overlaps it, though the input's pointer is at its end."""
    reversed_ = FakeDeviceArray(1024 + 12, (4,), strides=(-4,))  # spans [1024, 1040)
    assert overlap(FakeDeviceArray(1000, (8,)), reversed_)
    assert not overlap(FakeDeviceArray(1040, (4,)), reversed_)
    assert not overlap(FakeDeviceArray(1024, (0,)), reversed_) and not overlap(np.ones(3), reversed_)
    aval = ShapedArray((8,), np.dtype(np.float32))
    with pytest.raises(ArgumentValueError, match="shares memory with input 0"):
        check_out([FakeDeviceArray(1000, (8,))], [aval], [reversed_])
