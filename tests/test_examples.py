"""The example scripts run, and what they compute matches NumPy."""

from __future__ import annotations

import importlib.util
import os

import numpy as np
import pytest

EXAMPLES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples")


def _load(name: str):
    spec = importlib.util.spec_from_file_location(f"examples_{name}", os.path.join(EXAMPLES, f"{name}.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _per_sample_grads_numpy(params, xs, activation: str):
    """Hand-written backprop of sum(mlp(x)) for every sample at once (float64), flattened per sample
    layer by layer (weights, then bias) like the example."""
    act = (lambda a: a) if activation == "identity" else np.tanh
    dact = (lambda a: np.ones_like(a)) if activation == "identity" else (lambda a: 1 - np.tanh(a) ** 2)
    params = [(w.astype(np.float64), b.astype(np.float64)) for w, b in params]
    hs, pre = [xs.astype(np.float64)], []
    for i, (w, b) in enumerate(params):
        a = hs[-1] @ w + b
        pre.append(a)
        hs.append(act(a) if i < len(params) - 1 else a)
    delta = np.ones_like(hs[-1])  # d sum(out) / d out
    grads = [None] * len(params)
    for i in reversed(range(len(params))):
        grads[i] = (np.einsum("bi,bo->bio", hs[i], delta), delta)
        if i:
            delta = (delta @ params[i][0].T) * dact(pre[i - 1])
    batch = xs.shape[0]
    G = np.concatenate([p.reshape(batch, -1) for dw, db in grads for p in (dw, db)], axis=1)
    return grads, G


@pytest.fixture(scope="module")
def per_sample_results():
    return _load("per_sample_gradients").main(verbose=False)


def test_per_sample_gradients_main_prints_fisher(capsys):
    module = _load("per_sample_gradients")
    module.main(batch=32, verbose=True)
    out = capsys.readouterr().out
    for name in ("identity", "tanh"):
        assert f"[{name}] empirical Fisher: shape (1738, 1738), trace" in out


@pytest.mark.parametrize("activation", ["identity", "tanh"])
def test_per_sample_gradients_and_fisher_match_numpy(per_sample_results, activation):
    res = per_sample_results[activation]
    params, xs = res["params"], res["xs"]
    assert xs.shape == (256, 10) and xs.dtype == np.float32
    grads, G = _per_sample_grads_numpy(params, xs, activation)
    for (dw, db), (rw, rb) in zip(res["per_sample"], grads):
        np.testing.assert_allclose(dw, rw, rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(db, rb, rtol=1e-4, atol=1e-4)
    F = res["fisher"]
    F_ref = G.T @ G
    assert F.shape == (G.shape[1], G.shape[1]) == (1738, 1738)
    np.testing.assert_allclose(F, F.T, rtol=1e-5, atol=1e-6 * np.abs(F_ref).max())
    np.testing.assert_allclose(F, F_ref, rtol=1e-3, atol=1e-5 * np.abs(F_ref).max())
    np.testing.assert_allclose(np.trace(F), np.sum(G**2), rtol=1e-5)
    assert res["max_loop_error"] < 1e-4


def test_autodiff_cookbook_runs_and_prints_its_sections(capsys):
    """The ported cookbook checks each section against NumPy and finite differences itself; here: it runs
    to the end and prints what the cookbook prints."""
    module = _load("autodiff_cookbook")
    results = module.main()
    out = capsys.readouterr().out
    for line in ("jacfwd result, with shape (4, 3)", "jacrev result, with shape (4, 3)",
                 "hessian, with shape (4, 3, 3)", "Forward over reverse", "Reverse over reverse"):
        assert line in out
    assert results["hvp"].shape == (30, 40) and results["mjp"].shape == (128, 3)
