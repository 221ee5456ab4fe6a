"""Record jax.grad of the cumulative reductions at ties and zeros into sort_jax_values.json (run by
hand; test_prims_sort.py reads the file, since differentiating JAX's associative scans costs seconds
of XLA compilation):  python tests/tracer/record_sort_jax.py
"""

from __future__ import annotations

import json
from pathlib import Path

HERE = Path(__file__).resolve().parent
OUT = HERE / "sort_jax_values.json"
# (primitive, axis, reverse) of a (2, n) operand; n covers every shape of JAX's associative scan's levels
CONFIGS = [("cummax", 1, False), ("cummin", 1, True), ("cumprod", 0, True), ("cummax", 0, True), ("cumprod", 1, False),
           ("cumsum", 1, True), ("cumlogsumexp", 1, False)]
LENGTHS = (1, 2, 3, 4, 5, 8, 9)


def cases() -> list[dict]:
    """Integer-valued float64 operands (ties for cummax/cummin, zeros for cumprod) and cotangents."""
    import numpy as np

    rng = np.random.default_rng(3)
    out = []
    for n in LENGTHS:
        for name, axis, reverse in CONFIGS:
            out.append({"prim": name, "axis": axis, "reverse": reverse,
                        "x": rng.integers(-2, 3, size=(2, n)).astype(float).tolist(),
                        "ct": rng.integers(-3, 4, size=(2, n)).astype(float).tolist()})
    return out


def main() -> None:
    import jax
    import numpy as np

    with jax.enable_x64(True):
        found = []
        for case in cases():
            fn = getattr(jax.lax, case["prim"])
            _, pullback = jax.vjp(lambda x, c=case, fn=fn: fn(x, c["axis"], c["reverse"]), np.array(case["x"]))
            (grad,) = pullback(np.array(case["ct"]))
            found.append({**case, "grad": np.asarray(grad).tolist()})
    rows = ",\n".join(json.dumps(case) for case in found)  # one case a line
    OUT.write_text(f'{{"jax": "{jax.__version__}", "cases": [\n{rows}\n]}}\n')


if __name__ == "__main__":
    main()
