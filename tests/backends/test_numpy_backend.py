"""The numpy reference backend: results, output ownership, slot release and the checked mode."""

import numpy as np
import pytest

import ember
import ember.backends.numpy as numpy_backend
import ember.numpy as jnp
from ember.backends import available_backends, default_backend, get_backend
from ember.passes.memory import plan_memory
from ember.tracer import ShapedArray, trace_flat
from ember.tracer import prims as P
from ember.tracer.primitive import impl_rules


def _compile(fn, *shapes):
    g = trace_flat(lambda *a: list(fn(*a)), [ShapedArray(s, np.float64) for s in shapes])
    return get_backend("numpy").compile(g, plan_memory(g))


def test_registry_names_the_backends():
    assert "numpy" in available_backends()
    assert default_backend() in available_backends()
    with pytest.raises(ValueError, match="unknown backend 'nope'"):
        get_backend("nope")


def test_outputs_never_alias_inputs_or_consts():
    const = np.arange(6.0).reshape(2, 3)
    exe = _compile(lambda x: [x, x.reshape(6), x.T, jnp.asarray(const) + 0.0, const[0] * 1.0], (2, 3))
    x = np.ones((2, 3))
    outs = exe(x)
    for o in outs:
        assert not np.shares_memory(o, x) and not np.shares_memory(o, const)
        assert o.flags.writeable
    np.asarray(outs[0])[...] = 7  # through NumPy: the Array itself refuses writes
    assert (x == 1).all()


def test_broadcast_outputs_are_writable_copies():
    exe = _compile(lambda x: [jnp.broadcast_to(x, (4, 3)), jnp.zeros((2, 2))], (3,))
    outs = exe(np.arange(3.0))
    for o in outs:
        data = np.asarray(o)  # an Array is a view of its own buffer
        assert data.flags.writeable and data.flags.owndata or data.base.flags.owndata and data.base.base is None
        data[...] = 0  # must not raise


def test_intermediates_are_released_after_their_last_use():
    """A large intermediate must not stay alive until the end of the call: the generated function
    deletes each intermediate right after its last reader, and never an input or an output."""
    exe = _compile(lambda x: [jnp.sum(jnp.exp(x) * 2.0) + jnp.sum(jnp.sin(x)), jnp.cos(x)], (1000,))
    lines = [line for line in exe.source.splitlines() if "_check(" not in line]  # tests run checked
    deleted = [name.strip() for line in lines if line.strip().startswith("del ")
               for name in line.strip()[4:].split(",")]
    assert deleted and all(name.startswith("v") for name in deleted)
    returned = lines[-1]
    assert not any(f"({name})" in returned for name in deleted)
    exp_var = next(line.split("=")[0].strip() for line in lines if "# exp" in line)
    mul_line = next(i for i, line in enumerate(lines) if "# mul" in line)
    assert f"del {exp_var}" in lines[mul_line + 1], "exp's output must die right after the multiply"


def test_source_is_one_call_per_node_with_user_lines():
    exe = _compile(lambda x: [jnp.tanh(x) * 2.0], (3,))
    calls = [line for line in exe.source.splitlines() if " = f" in line]
    assert len(calls) == len(exe.graph.nodes)
    assert all("test_numpy_backend.py" in line for line in calls)


def test_checked_mode_catches_a_wrong_numpy_rule(monkeypatch):
    exe = _compile(lambda x: [jnp.exp(x)], (3,))
    monkeypatch.setitem(impl_rules, P.exp_p, lambda x: np.exp(x).astype(np.float32))
    with pytest.raises(AssertionError, match="exp.*float32.*f64"):
        numpy_backend.NumpyExecutable(exe.graph, exe.plan, check=True)(np.ones(3))


def test_literal_and_const_outputs():
    f = ember.jit(lambda x: (1.5, np.arange(3.0), x))
    a, b, c = f(np.float32(2.0))
    assert a.dtype == np.float32 and a.shape == () and float(a) == 1.5
    np.testing.assert_array_equal(b, np.arange(3.0))
    np.asarray(b)[0] = 99.0
    np.testing.assert_array_equal(f(np.float32(2.0))[1], np.arange(3.0))
