"""Test configuration: every numpy-backend node is checked against its aval, every graph that
tracing, a transform (grad, vmap) or a pass produces is verified, so a wrong shape rule or a broken
transform or pass fails loudly wherever it happens, and every compiled call is checked against the
oracle (ember.config.check_oracle), so every function the suite runs is a differential test of the
optimizer."""

import os

import numpy as np
import pytest
from hypothesis import settings

import ember.backends.numpy as numpy_backend
import ember.config
import ember.tracer.ir as ir

numpy_backend.CHECK = True
ir.VERIFY = True
if "EMBER_CHECK_ORACLE" not in os.environ:  # EMBER_CHECK_ORACLE=0 runs the suite without it (to time it)
    ember.config.update("ember_check_oracle", True)

# Hypothesis: no per-example deadline (first calls trace and compile); under CI (CI=true) the examples
# are derandomized, so a run is reproducible and cannot fail by chance. Each test states max_examples.
settings.register_profile("ember", deadline=None)
settings.register_profile("ci", deadline=None, derandomize=True, database=None, print_blob=True)
settings.load_profile("ci" if os.environ.get("CI") else "ember")


@pytest.fixture
def rng():
    return np.random.default_rng(0)
