"""Test configuration: every numpy-backend node is checked against its aval and every pass's output
graph is verified, so a wrong shape rule or a broken pass fails loudly wherever it happens."""

import numpy as np
import pytest

import ember.backends.numpy as numpy_backend
import ember.passes.pipeline as pipeline

numpy_backend.CHECK = True
pipeline.VERIFY = True


@pytest.fixture
def rng():
    return np.random.default_rng(0)
