"""Test configuration: every numpy-backend node is checked against its aval, and every graph that
tracing, a transform (grad, vmap) or a pass produces is verified, so a wrong shape rule or a broken
transform or pass fails loudly wherever it happens."""

import numpy as np
import pytest

import ember.backends.numpy as numpy_backend
import ember.tracer.ir as ir

numpy_backend.CHECK = True
ir.VERIFY = True


@pytest.fixture
def rng():
    return np.random.default_rng(0)
