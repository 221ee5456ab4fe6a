"""The bit primitives (xor, shift_left, shift_right_logical, shift_right_arithmetic, population_count, clz,
bitcast_convert_type) against values recorded from jax.lax 0.10.2 (x64 on), on the numpy reference, the
LLVM backend and the CUDA kernels run as host C++; their public names and operators with JAX's
promotion; vmap and grad through them; and a Threefry-2x32 hash (Random123's known answers) that
fuses into one loop."""

import numpy as np
import pytest

import ember
import ember.lax as lax
import ember.numpy as jnp
from ember.errors import DTypeError
from ember.tracer import prims as P

SHIFTS = ("shift_left", "shift_right_logical", "shift_right_arithmetic")
COUNTS = ("population_count", "clz")
X = {"int8": [0, 1, -1, 127, -128, 37, -77, 5],
     "int32": [0, 1, -1, 2147483647, -2147483648, 123456789, -987654321, 5],
     "int64": [0, 1, -1, 9223372036854775807, -9223372036854775808, 1234567890123456789, -987654321987654321, 5],
     "uint8": [0, 1, 255, 127, 128, 37, 200, 5],
     "uint32": [0, 1, 4294967295, 2147483647, 2147483648, 2654435769, 466688986, 5],
     "uint64": [0, 1, 18446744073709551615, 9223372036854775807, 9223372036854775808, 11400714819323198485,
                466688986, 5]}


def amounts(dtype: str) -> list[int]:
    """Shift amounts at and beyond the edges: 0, 1, bits - 1, bits, bits + 1, 3, and a negative one and
    -bits (signed) or 2 * bits and the largest value (unsigned)."""
    bits = 8 * np.dtype(dtype).itemsize
    if dtype.startswith("u"):
        return [0, 1, bits - 1, bits, bits + 1, 3, 2 * bits, int(np.iinfo(dtype).max)]
    return [0, 1, bits - 1, bits, bits + 1, 3, -1, -bits]


# jax.lax's results on X and amounts(dtype), recorded with jax 0.10.2 (jax_enable_x64)
JAX = {
    "int8": {"shift_left": [0, 2, -128, 0, 0, 40, 0, 0], "shift_right_logical": [0, 0, 1, 0, 0, 4, 0, 0],
             "shift_right_arithmetic": [0, 0, -1, 0, -1, 4, -1, 0], "population_count": [0, 1, 8, 7, 1, 3, 5, 2],
             "clz": [8, 7, 0, 1, 0, 2, 0, 5]},
    "int32": {"shift_left": [0, 2, -2147483648, 0, 0, 987654312, 0, 0],
              "shift_right_logical": [0, 0, 1, 0, 0, 15432098, 0, 0],
              "shift_right_arithmetic": [0, 0, -1, 0, -1, 15432098, -1, 0],
              "population_count": [0, 1, 32, 31, 1, 16, 16, 2], "clz": [32, 31, 0, 1, 0, 5, 0, 29]},
    "int64": {"shift_left": [0, 2, -9223372036854775808, 0, 0, -8570200952721897304, 0, 0],
              "shift_right_logical": [0, 0, 1, 0, 0, 154320986265432098, 0, 0],
              "shift_right_arithmetic": [0, 0, -1, 0, -1, 154320986265432098, -1, 0],
              "population_count": [0, 1, 64, 63, 1, 26, 30, 2], "clz": [64, 63, 0, 1, 0, 3, 0, 61]},
    "uint8": {"shift_left": [0, 2, 128, 0, 0, 40, 0, 0], "shift_right_logical": [0, 0, 1, 0, 0, 4, 0, 0],
              "shift_right_arithmetic": [0, 0, 255, 0, 255, 4, 255, 0],
              "population_count": [0, 1, 8, 7, 1, 3, 3, 2], "clz": [8, 7, 0, 1, 0, 2, 0, 5]},
    "uint32": {"shift_left": [0, 2, 2147483648, 0, 0, 4055616968, 0, 0],
               "shift_right_logical": [0, 0, 1, 0, 0, 331804471, 0, 0],
               "shift_right_arithmetic": [0, 0, 4294967295, 0, 4294967295, 4089900855, 0, 0],
               "population_count": [0, 1, 32, 31, 1, 20, 17, 2], "clz": [32, 31, 0, 1, 0, 0, 3, 29]},
    "uint64": {"shift_left": [0, 2, 9223372036854775808, 0, 0, 17418742259747381416, 0, 0],
               "shift_right_logical": [0, 0, 1, 0, 0, 1425089352415399810, 0, 0],
               "shift_right_arithmetic": [0, 0, 18446744073709551615, 0, 18446744073709551615,
                                          17565990416911257474, 0, 0],
               "population_count": [0, 1, 64, 63, 1, 38, 17, 2], "clz": [64, 63, 0, 1, 0, 0, 35, 61]},
}
OPS = (*SHIFTS, *COUNTS, "xor")


def _all_ops(*operands):
    """Every op on every dtype's (x, amount) pair: one function, so each backend compiles once."""
    out = []
    for x, y in zip(operands[::2], operands[1::2]):
        out += [getattr(lax, name)(x, y) for name in SHIFTS]
        out += [lax.population_count(x), lax.clz(x), lax.bitwise_xor(x, y)]
    return out


def _operands() -> list[np.ndarray]:
    return [a for dt in X for a in (np.array(X[dt], dt), np.array(amounts(dt), dt))]


def _check_table(got) -> None:
    """`got` (the outputs of `_all_ops`) is what jax.lax gives."""
    got = iter(got)
    for dt in X:
        x, y = np.array(X[dt], dt), np.array(amounts(dt), dt)
        want = {**{name: np.array(JAX[dt][name], dt) for name in (*SHIFTS, *COUNTS)}, "xor": x ^ y}
        for name in OPS:
            np.testing.assert_array_equal(next(got), want[name], strict=True, err_msg=f"{name} {dt}")


def test_every_op_matches_jax_at_every_width_and_edge_amount():
    _check_table(ember.jit(_all_ops)(*_operands()))


def test_eager_calls_run_the_numpy_reference():
    x, y = np.array(X["int8"], np.int8), np.array(amounts("int8"), np.int8)
    np.testing.assert_array_equal(lax.shift_right_arithmetic(x, y), np.array(JAX["int8"]["shift_right_arithmetic"],
                                                                            np.int8), strict=True)
    assert lax.clz(np.uint64(1)) == 63 and lax.population_count(np.int16(-1)) == 16


def test_xor_is_bitwise_on_integers_and_logical_on_bools():
    f = ember.jit(lambda a, b, p, q: (a ^ b, lax.bitwise_xor(p, q), jnp.bitwise_xor(p, True)))
    a, b = np.array([0, 5, -1], np.int16), np.array([3, 5, 0x5555], np.int16)
    p, q = np.array([True, True, False, False]), np.array([True, False, True, False])
    ints, bools, negated = f(a, b, p, q)
    np.testing.assert_array_equal(ints, np.array([3, 0, -0x5556], np.int16), strict=True)
    np.testing.assert_array_equal(bools, np.array([False, True, True, False]), strict=True)
    np.testing.assert_array_equal(negated, ~p, strict=True)


F32_BITS = np.array([0.0, -0.0, 1.0, -2.5, np.inf, -np.inf, 1e-45], np.float32)
NAN_BITS = np.array([0x7FC00001, 0xFFA00000], np.uint32)  # quiet NaNs with payloads and signs
HALF = np.array([0.0, -0.0, 1.0, 65504.0, 6e-8, -np.inf], np.float16)
WIDE = np.array([np.pi, -0.0, 5e-324, np.inf], np.float64)


def _bitcasts(x32, bits, h, d):
    """Bit casts at 16, 32 and 64 bits, one way and round trips."""
    def cast(v, dt):
        return lax.bitcast_convert_type(v, dt)
    return (cast(x32, np.uint32), cast(x32, np.int32), cast(bits, np.float32), cast(h, np.int16),
            cast(cast(h, np.uint16), np.float16), cast(d, np.uint64), cast(cast(d, np.int64), np.float64))


def _check_bitcasts(got) -> None:
    want = (F32_BITS.view(np.uint32), F32_BITS.view(np.int32), NAN_BITS.view(np.float32), HALF.view(np.int16),
            HALF, WIDE.view(np.uint64), WIDE)
    for k, (g, w) in enumerate(zip(got, want, strict=True)):
        assert g.dtype == w.dtype, k
        np.testing.assert_array_equal(g.view(f"u{w.dtype.itemsize}"), w.view(f"u{w.dtype.itemsize}"), err_msg=str(k))


def test_bitcast_reads_the_same_bits_both_ways():
    _check_bitcasts(ember.jit(_bitcasts)(F32_BITS, NAN_BITS, HALF, WIDE))


def test_the_cuda_kernels_run_as_host_cpp_give_the_same_bits():
    """Every op at every width and edge amount, and the bit casts, in one CUDA module run as host C++."""
    n = len(_operands())
    got = ember.jit(lambda *a: (_all_ops(*a[:n]), _bitcasts(*a[n:])), backend="cuda-host")(
        *_operands(), F32_BITS, NAN_BITS, HALF, WIDE)
    _check_table(got[0])
    _check_bitcasts(got[1])


def test_bitcast_refuses_bool_and_other_widths_at_the_users_line():
    f = ember.jit(lambda x: lax.bitcast_convert_type(x, np.int16))
    with pytest.raises(TypeError, match="different widths") as e:
        f(np.ones(3, np.float32))
    assert isinstance(e.value, DTypeError) and "test_prims_bits.py" in str(e.value)
    with pytest.raises(DTypeError, match="does not support bool"):
        ember.jit(lambda x: lax.bitcast_convert_type(x, np.uint8))(np.ones(3, bool))


@pytest.mark.parametrize("call,match", [
    (lambda: lax.shift_left(np.float32(1), np.float32(1)), "shift_left requires an integer operand, got float32"),
    (lambda: lax.population_count(np.array([True])), "population_count requires an integer operand, got bool"),
    (lambda: lax.clz(np.float64(1)), "clz requires an integer operand"),
    (lambda: lax.bitwise_xor(np.float32(1), np.float32(2)), "xor requires an integer or bool operand"),
    (lambda: lax.shift_right_logical(np.int32(1), np.int8(1)), "operand dtypes int32 and int8 differ"),
])
def test_wrong_dtypes_raise_type_errors(call, match):
    with pytest.raises(TypeError, match=match):
        call()


def test_operators_and_numpy_names_promote_as_jax():
    def f(x, s, u8):
        return (x ^ 0x1BD11BDA, x << 13, x >> 19, ~x, 3 << s, 0xFF ^ s, jnp.right_shift(s, 1),
                jnp.right_shift(u8, 1), jnp.left_shift(s, u8), jnp.bitwise_count(s), jnp.invert(u8),
                jnp.bitwise_left_shift(u8, 4), jnp.bitwise_right_shift(u8, 9))
    x, s, u8 = np.array([0x9E3779B9, 7], np.uint32), np.array([-8, 1], np.int8), np.array([248, 1], np.uint8)
    got = ember.jit(f)(x, s, u8)
    # jax.numpy's results, recorded with jax 0.10.2
    want = [np.array([0x85E66263, 0x1BD11BDD], np.uint32), np.array([0xEF372000, 0xE000], np.uint32),
            np.array([0x13C6, 0], np.uint32), ~x, np.array([0, 6], np.int8), np.array([7, -2], np.int8),
            np.array([-4, 0], np.int8), np.array([124, 0], np.uint8), np.array([0, 2], np.int16),
            np.array([1, 1], np.uint8), np.array([7, 254], np.uint8), np.array([128, 16], np.uint8),
            np.array([0, 0], np.uint8)]
    for k, (g, w) in enumerate(zip(got, want, strict=True)):
        np.testing.assert_array_equal(g, w, strict=True, err_msg=str(k))


def test_vmap_batches_operands_and_amounts():
    x, amount = np.array([1, -16, 255], np.int32), np.array([0, 4, 31, 32], np.int32)
    got = ember.vmap(lambda n: (lax.shift_right_arithmetic(x, n), lax.shift_left(x, n)))(amount)
    np.testing.assert_array_equal(got[0], np.stack([P.shift_right_arithmetic(x, np.full(3, n, np.int32))
                                                    for n in amount]), strict=True)
    np.testing.assert_array_equal(got[1][3], np.zeros(3, np.int32), strict=True)
    counts = ember.vmap(lambda v: (lax.population_count(v), lax.bitcast_convert_type(v, np.float32)))(
        np.array([[1, 3], [-1, 0]], np.int32))
    np.testing.assert_array_equal(counts[0], np.array([[1, 2], [32, 0]], np.int32), strict=True)
    assert counts[1].dtype == np.float32 and counts[1].shape == (2, 2)


def test_grad_through_an_integer_path_is_zero_as_jax():
    def f(x):
        bits = lax.bitcast_convert_type(x, np.int32)
        noisy = lax.bitcast_convert_type(lax.shift_left(bits ^ 1, 0) | lax.population_count(bits), np.float32)
        return (noisy + (bits >> 3).astype(np.float32)).sum()

    g = ember.grad(f)(np.array([1.0, -2.0, 3.5], np.float32))
    np.testing.assert_array_equal(g, np.zeros(3, np.float32), strict=True)
    _, tangent = ember.jvp(f, (np.ones(3, np.float32),), (np.ones(3, np.float32),))
    assert float(tangent) == 0.0


_BITS = {"xor", "shift_left", "shift_right_logical", "shift_right_arithmetic", "population_count", "clz",
         "bitcast_convert_type"}
# what tests/tracer/test_prims_custom.py's registry check counts: the value table against JAX
# (reference), test_wrong_dtypes_raise_type_errors and the bitcast refusals (errors), the zero
# gradients and tangents (vjp) and vmap (batch)
COVERED = {"reference": _BITS, "errors": _BITS, "vjp": _BITS, "batch": _BITS}


def _rotate_left(x, r: int):
    return (x << r) | (x >> (32 - r))


def threefry_2x32(k0, k1, x0, x1):
    """Threefry-2x32 with 20 rounds, as Random123 and JAX: 5 groups of 4 rounds, a key injection after each."""
    ks = (k0, k1, k0 ^ k1 ^ 0x1BD11BDA)
    rotations = ((13, 15, 26, 6), (17, 29, 16, 24))
    x0, x1 = x0 + k0, x1 + k1
    for group in range(5):
        for r in rotations[group % 2]:
            x0 = x0 + x1
            x1 = _rotate_left(x1, r) ^ x0
        x0 = x0 + ks[(group + 1) % 3]
        x1 = x1 + ks[(group + 2) % 3] + np.uint32(group + 1)
    return x0, x1


# Random123's known answers for threefry2x32_20: (key, counter) -> output
KNOWN = [((0, 0), (0, 0), (0x6B200159, 0x99BA4EFE)),
         ((0xFFFFFFFF, 0xFFFFFFFF), (0xFFFFFFFF, 0xFFFFFFFF), (0x1CB996FC, 0xBB002BE7)),
         ((0x13198A2E, 0x03707344), (0x243F6A88, 0x85A308D3), (0xC4923A9C, 0x483DF7A0))]


def test_threefry_is_one_loop_and_gives_the_known_answers():
    """~120 elementwise nodes over the counters fuse into one kernel (only the 0-d third key, read at every
    element, so computed once, is another), which computes Random123's answers."""
    n = 64
    lowered = ember.jit(threefry_2x32).lower(np.uint32(0), np.uint32(0), np.zeros(n, np.uint32), np.zeros(n, np.uint32))
    assert len(lowered.graph.nodes) > 100
    kernels = [node for node in lowered.optimized.nodes if node.outputs[0].aval.shape == (n,)]
    assert [node.prim.name for node in kernels] == ["fusion"], lowered.explain()
    assert {v.aval.shape for node in lowered.optimized.nodes for v in node.outputs} == {(), (n,)}
    compiled = lowered.compile()
    for (k0, k1), (c0, c1), want in KNOWN:
        got = compiled(np.uint32(k0), np.uint32(k1), np.full(n, c0, np.uint32), np.full(n, c1, np.uint32))
        assert all(v.dtype == np.uint32 for v in got)
        np.testing.assert_array_equal(np.stack(got), np.repeat(np.array(want, np.uint32)[:, None], n, 1))
