"""examples/rnn_scan.py trains, and is JAX code: the same file with JAX's import lines computes the same
losses step by step."""

from __future__ import annotations

import importlib.util
import os
import types

import numpy as np
import pytest

PATH = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples", "rnn_scan.py")
IMPORTS = {"import ember as jax  # was: import jax": "import jax",
           "import ember.numpy as jnp  # was: import jax.numpy as jnp": "import jax.numpy as jnp",
           "from ember import lax  # was: from jax import lax": "from jax import lax"}


def _module(source: str, name: str) -> types.ModuleType:
    module = types.ModuleType(name)
    module.__file__ = PATH
    exec(compile(source, PATH, "exec"), module.__dict__)
    return module


def test_the_rnn_example_trains_and_matches_jax():
    spec = importlib.util.spec_from_file_location("examples_rnn_scan", PATH)
    ours = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ours)
    got = ours.main(steps=15, length=80, verbose=False)
    assert got["losses"][-1] < 0.2 * got["losses"][0]
    pytest.importorskip("jax")
    source = open(PATH).read()
    for line, jax_line in IMPORTS.items():
        assert line in source, "the example's import lines are the only difference from JAX code"
        source = source.replace(line, jax_line)
    want = _module(source, "rnn_scan_jax").main(steps=15, length=80, verbose=False)
    np.testing.assert_allclose(got["losses"], want["losses"], rtol=2e-4)
