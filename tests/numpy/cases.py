"""The comparison harness shared by tests/numpy and tests/test_nn.py: a `Case` runs an ember.numpy
function traced (under jit) and eagerly against NumPy, checks its gradient against finite
differences and its vmap against a loop. `expected_dtype` encodes ember's deliberate dtype
differences from NumPy (documented in test_promotion.py)."""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Callable

import numpy as np
import pytest

import ember
import ember.numpy as jnp
from tests.helpers import check_grads, loop_vmap, raises_naming

DTYPES = {"f16": np.float16, "f32": np.float32, "f64": np.float64, "i8": np.int8, "i16": np.int16,
          "i32": np.int32, "i64": np.int64, "u8": np.uint8, "u32": np.uint32, "bool": np.bool_}


SPECIAL_VALUES = {
    "special": np.array([0.0, -0.0, 1.5, -2.5, np.inf, -np.inf, np.nan, 0.5, -1e-30, 3.0]),
    "halves": np.array([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 0.25, 1.25, -0.75, 3.5, 14.5, 251.0]),
}


@dataclasses.dataclass(frozen=True)
class A:
    """How to make one array argument: shape, dtype name (DTYPES) and value domain."""

    shape: tuple = ()
    dtype: str = "f32"
    dom: str = "normal"  # normal | pos | unit | nonzero | posint | special | halves

    def make(self, rng, shape=None):
        shape = self.shape if shape is None else shape
        dt = np.dtype(DTYPES[self.dtype])
        dom = self.dom
        if dt.kind == "b":
            return rng.random(shape) < 0.5
        if dt.kind in "iu":
            lo, hi = {"posint": (1, 5), "nonzero": (1, 5)}.get(dom, (-5, 6))
            if dt.kind == "u":
                lo = max(lo, 0)
            vals = rng.integers(lo, hi, size=shape)
            if dom == "nonzero":
                vals = vals * rng.choice([-1, 1], size=shape) if dt.kind == "i" else vals
            return vals.astype(dt)
        if dom in SPECIAL_VALUES:
            vals = np.resize(SPECIAL_VALUES[dom], shape)
        elif dom == "pos":
            vals = rng.uniform(0.5, 2.0, size=shape)
        elif dom == "unit":
            vals = rng.uniform(-0.9, 0.9, size=shape)
        elif dom == "nonzero":
            vals = rng.uniform(0.5, 2.0, size=shape) * rng.choice([-1.0, 1.0], size=shape)
        else:
            vals = rng.standard_normal(size=shape)
        return np.asarray(vals).astype(dt)

    def label(self) -> str:
        return f"{self.dtype}{list(self.shape)}".replace(" ", "")


@dataclasses.dataclass
class Case:
    """One call of an ember function compared with a NumPy reference.

    `fn(*args)` is the ember call and `ref(*args)` the NumPy one; args are A specs (made into arrays)
    or Python values passed through. `dtype` overrides the expected result dtype (else
    `expected_dtype` of NumPy's result). grad/vmap say whether the gradient and vmap tests use it."""

    name: str
    fn: Callable
    ref: Callable
    args: tuple
    dtype: object = None
    grad: bool = True
    vmap: bool = True
    rtol: float | None = None
    atol: float | None = None
    note: str = ""

    @property
    def id(self) -> str:
        parts = [a.label() if isinstance(a, A) else repr(a) for a in self.args]
        return f"{self.name}-{','.join(parts)}{'-' + self.note if self.note else ''}"

    def make_args(self, rng, to_f64: bool = False) -> list:
        out = []
        for a in self.args:
            if isinstance(a, A):
                x = a.make(rng)
                if to_f64 and x.dtype.kind == "f":
                    x = x.astype(np.float64)
                out.append(x)
            else:
                out.append(a)
        return out


def case_ids(cases) -> list[str]:
    """Unique pytest ids for a list of cases."""
    seen: dict[str, int] = {}
    ids = []
    for c in cases:
        i = c.id
        seen[i] = seen.get(i, 0) + 1
        ids.append(i if seen[i] == 1 else f"{i}#{seen[i]}")
    return ids


def expected_dtype(np_dtype, in_dtypes) -> np.dtype:
    """The dtype ember gives where NumPy gives `np_dtype` from array operands of `in_dtypes`.

    Floats computed from integer/bool operands only are float32 (NumPy: float64, or float16 for
    8-bit ints), float64 if one is a 64-bit integer (as JAX with x64); from float and integer
    operands, the widest float operand (JAX's lattice: integers never widen a float, so i32 x f32 is
    f32 where NumPy gives f64); an int64 (uint64) result where no integer operand is 64 bits wide
    (sums of int32 or bool or uint8, argmax of anything) is int32 (uint32). Otherwise NumPy's table."""
    np_dtype = np.dtype(np_dtype)
    in_dtypes = [np.dtype(d) for d in in_dtypes]
    floats = [d for d in in_dtypes if d.kind == "f"]
    if np_dtype.kind == "f" and not floats:
        wide = any(d.kind in "iu" and d.itemsize == 8 for d in in_dtypes)
        return np.dtype(np.float64 if wide else np.float32)
    if np_dtype.kind == "f" and any(d.kind in "iub" for d in in_dtypes):
        return max(floats, key=lambda d: d.itemsize)
    if np_dtype == np.int64 and not any(d.kind in "iu" and (d.itemsize == 8 or d == np.uint32) for d in in_dtypes):
        return np.dtype(np.int32)
    if np_dtype == np.uint64 and not any(d.kind in "iu" and d.itemsize == 8 for d in in_dtypes):
        return np.dtype(np.uint32)
    return np_dtype


def tolerances(dtype, rtol=None, atol=None):
    dtype = np.dtype(dtype)
    if dtype == np.float64:
        return rtol or 1e-11, atol if atol is not None else 1e-12
    if dtype == np.float16:
        return rtol or 2e-3, atol if atol is not None else 2e-3
    return rtol or 2e-5, atol if atol is not None else 2e-6


def assert_matches(got, want, dtype, rtol=None, atol=None, what=""):
    """`got` (an ember result) is a NumPy array of `dtype` with `want`'s shape and values."""
    if isinstance(want, (list, tuple)):
        assert isinstance(got, (list, tuple)) and len(got) == len(want), f"{what}: {got!r} vs {want!r}"
        dts = dtype if isinstance(dtype, (list, tuple)) else [dtype] * len(want)
        for i, (g, w, d) in enumerate(zip(got, want, dts)):
            assert_matches(g, w, d, rtol, atol, f"{what}[{i}]")
        return
    assert isinstance(got, np.ndarray), f"{what}: expected a NumPy array, got {type(got).__name__}"
    want = np.asarray(want)
    assert got.shape == want.shape, f"{what}: shape {got.shape} != NumPy's {want.shape}"
    assert got.dtype == np.dtype(dtype), f"{what}: dtype {got.dtype} != expected {np.dtype(dtype)}"
    if got.dtype.kind == "f":
        # NumPy computes 8-bit ints in float16: compare with the coarser precision of the two.
        coarse = want.dtype if want.dtype.kind == "f" and want.dtype.itemsize < got.dtype.itemsize else got.dtype
        rtol, atol = tolerances(coarse, rtol, atol)
        np.testing.assert_allclose(got, want.astype(got.dtype), rtol=rtol, atol=atol, equal_nan=True,
                                   err_msg=what)
    else:
        np.testing.assert_array_equal(got, want, err_msg=what)


def _in_dtypes(args):
    return [a.dtype for a in args if isinstance(a, np.ndarray)]


def _expected(case: Case, args, want):
    if case.dtype is not None:
        return case.dtype(*args) if callable(case.dtype) and not isinstance(case.dtype, type) else case.dtype
    if isinstance(want, (list, tuple)):
        return [expected_dtype(np.asarray(w).dtype, _in_dtypes(args)) for w in want]
    return expected_dtype(np.asarray(want).dtype, _in_dtypes(args))


def check_values(case: Case, seed: int = 0):
    """ember's function in eager mode (NumPy in, no trace) and under jit equals NumPy's."""
    args = case.make_args(np.random.default_rng(seed))
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # NumPy's "mean of empty slice" and the like
        want = case.ref(*args)
        dtype = _expected(case, args, want)
        eager = case.fn(*args)
        traced = ember.jit(case.fn)(*args)
    assert_matches(eager, want, dtype, case.rtol, case.atol, f"{case.id} eager")
    assert_matches(traced, want, dtype, case.rtol, case.atol, f"{case.id} jit")


def grad_argnums(case: Case, args) -> tuple[int, ...]:
    return tuple(i for i, (spec, a) in enumerate(zip(case.args, args))
                 if isinstance(spec, A) and a.dtype.kind == "f")


def differentiable(case: Case) -> bool:
    return case.grad and any(isinstance(a, A) and a.dtype in ("f32", "f64") for a in case.args)


def check_case_grads(case: Case, seed: int = 0, rtol: float = 1e-5, atol: float = 1e-7):
    """grad of sum(fn(*args) * w) (w a fixed random cotangent) matches finite differences in float64."""
    rng = np.random.default_rng(seed)
    args = case.make_args(rng, to_f64=True)
    with np.errstate(all="ignore"):
        out = case.fn(*args)
    if isinstance(out, (list, tuple)):
        ws = [rng.standard_normal(np.shape(o)) for o in out]

        def loss(*a):
            return sum(jnp.sum(o * w) for o, w in zip(case.fn(*a), ws))
    else:
        w = rng.standard_normal(np.shape(out))

        def loss(*a):
            return jnp.sum(case.fn(*a) * w)

    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        check_grads(loss, args, grad_argnums(case, args), rtol=rtol, atol=atol)


def batchable(case: Case) -> bool:
    return case.vmap and any(isinstance(a, A) for a in case.args)


def check_vmap(case: Case, mode: str, size: int = 3, seed: int = 0):
    """vmap(fn) equals a loop over the batch. mode: 'first0' (first array argument batched on axis 0,
    the others not), 'first_last' (the same on its last axis, in_axes=-1), 'all0' (every array
    argument on axis 0)."""
    rng = np.random.default_rng(seed)
    specs = case.args
    arr_pos = [i for i, s in enumerate(specs) if isinstance(s, A)]
    batched = arr_pos[:1] if mode != "all0" else arr_pos
    args, in_axes = [], []
    for i, s in enumerate(specs):
        if i in batched:
            ax = len(s.shape) if mode == "first_last" else 0
            shape = s.shape[:ax] + (size,) + s.shape[ax:]
            args.append(s.make(rng, shape))
            in_axes.append(-1 if mode == "first_last" else 0)
        else:
            args.append(s.make(rng) if isinstance(s, A) else s)
            in_axes.append(None)
    static = {i: a for i, a in enumerate(args) if not isinstance(specs[i], A)}
    dyn = [a for i, a in enumerate(args) if i not in static]
    dyn_axes = tuple(ax for i, ax in enumerate(in_axes) if i not in static)

    def f(*dyn_args):
        it = iter(dyn_args)
        return case.fn(*[static[i] if i in static else next(it) for i in range(len(args))])

    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        want = loop_vmap(f, dyn_axes, dyn)
        got = ember.vmap(f, in_axes=dyn_axes)(*dyn)
    dtypes = ([np.asarray(w).dtype for w in want] if isinstance(want, (list, tuple))
              else np.asarray(want).dtype)
    assert_matches(got, want, dtypes, case.rtol, case.atol, f"{case.id} vmap {mode}")


VMAP_MODES = ("first0", "first_last", "all0")


def vmap_params(cases):
    """(case, mode) pytest params for every batchable case; 'all0' only with several array args."""
    out = []
    for c, cid in zip(cases, case_ids(cases)):
        if not batchable(c):
            continue
        n_arrays = sum(isinstance(a, A) for a in c.args)
        for mode in VMAP_MODES:
            if mode == "all0" and n_arrays < 2:
                continue
            out.append(pytest.param(c, mode, id=f"{cid}-{mode}"))
    return out


def grad_params(cases):
    return [pytest.param(c, id=cid) for c, cid in zip(cases, case_ids(cases)) if differentiable(c)]


def value_params(cases):
    return [pytest.param(c, id=cid) for c, cid in zip(cases, case_ids(cases))]


def covered(cases) -> set[str]:
    return {c.name for c in cases}


# --- promotion ------------------------------------------------------------------------------------


def case_tests(cases):
    """The three tests every case table gets: values vs NumPy (traced and eager), gradients vs finite
    differences, vmap vs a loop. Assign them to module-level test_* names so pytest collects them."""

    @pytest.mark.parametrize("case", value_params(cases))
    def test_values_match_numpy(case):
        check_values(case)

    @pytest.mark.parametrize("case", grad_params(cases))
    def test_grads_match_finite_differences(case):
        check_case_grads(case)

    @pytest.mark.parametrize("case, mode", vmap_params(cases))
    def test_vmap_matches_loop(case, mode, monkeypatch):
        if mode == "first_last":  # the batching rules are the subject: a batch axis last is checked on the
            monkeypatch.setenv("EMBER_BACKEND", "numpy")  # oracle backend; the compiled leg checks the others
        check_vmap(case, mode)

    return test_values_match_numpy, test_grads_match_finite_differences, test_vmap_matches_loop


def raises_shape_error(fn, *args, words=(), file: str):
    """fn raises a ShapeError eagerly and under jit whose message names `words` and the user's line:
    a lambda's own line in `file`, else the line of tests/helpers.py that calls the ember function."""
    where = f"{file}:{fn.__code__.co_firstlineno}" if fn.__name__ == "<lambda>" else "helpers.py:"
    for call in (fn, ember.jit(fn)):
        raises_naming(ember.errors.SHAPE_ERRORS, call, *args, words=words, location=where)
