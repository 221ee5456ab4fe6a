"""Bugs found by the random-program tests (tests/test_random_programs.py) in files other helpers own,
kept as minimal reproducers marked xfail(strict=True): each starts passing, and so fails this file,
the moment its bug is fixed, which is the cue to drop the mark."""

import numpy as np
import pytest

import ember


@pytest.mark.xfail(strict=True, raises=ValueError,
                   reason="ember/numpy/_indexing.py _normalize_key finds the Ellipsis with "
                          "items.index(Ellipsis), which compares an integer-array index with == (an "
                          "elementwise array, so 'truth value ... is ambiguous'); use an identity test")
@pytest.mark.parametrize("index", [np.array([1, 0]), [1, 0]], ids=["ndarray", "list"])
def test_integer_array_index_before_ellipsis_under_jit(index):
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    out = ember.jit(lambda a: a[index, ...])(x)
    np.testing.assert_array_equal(out, x[np.asarray(index), ...])
