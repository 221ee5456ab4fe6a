"""Record JAX's results for the calls in cases.py into jax_values.json (run by hand; the suite reads the
file and needs no JAX):  python tests/random/record_jax.py

The x64 cases (explicit 64-bit dtypes, and 64-bit defaults) run in a subprocess with JAX_ENABLE_X64=1,
since the switch must precede any JAX array.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
OUT = HERE / "jax_values.json"


def encode(value) -> dict | list:
    """A result as JSON: dtype, shape and the flat values (typed keys as their key data)."""
    import jax
    import numpy as np

    if isinstance(value, (tuple, list)):
        return [encode(v) for v in value]
    is_key = jax.dtypes.issubdtype(value.dtype, jax.dtypes.prng_key)
    arr = np.asarray(jax.random.key_data(value) if is_key else value)
    flat = arr.ravel().tolist()
    return {"key": bool(is_key), "dtype": arr.dtype.name, "shape": list(arr.shape), "value": flat}


def record(exprs: list[str]) -> dict:
    """Each expression's JAX result, evaluated with jax.random and the keys of cases.py."""
    import jax

    sys.path.insert(0, str(HERE))
    import cases

    ns = cases.namespace(jax.random, jax.grad, jax.vmap, jax.jit)
    return {expr: encode(eval(expr, ns)) for expr in exprs}


def main() -> None:
    if os.environ.get("RECORD_X64_CHILD"):
        sys.path.insert(0, str(HERE))
        import cases

        json.dump({"x64": record(cases.X64), "x64_defaults": record(cases.X64_DEFAULTS)}, sys.stdout)
        return
    import jax

    sys.path.insert(0, str(HERE))
    import cases

    assert not jax.config.jax_enable_x64 and jax.config.jax_threefry_partitionable
    env = {**os.environ, "JAX_ENABLE_X64": "1", "RECORD_X64_CHILD": "1"}
    x64 = json.loads(subprocess.run([sys.executable, __file__], env=env, check=True, capture_output=True,
                                    text=True).stdout)
    import jax.numpy as jnp

    space: dict = {}
    exec(cases.PROGRAM, space)
    program = encode(space["program"](jax, jnp))
    data = {"jax_version": jax.__version__, "cases": record(cases.DISTRIBUTIONS), **x64, "program": program}
    OUT.write_text(json.dumps(data, indent=0, sort_keys=True) + "\n")
    print(f"wrote {OUT} ({len(data['cases'])} + {len(data['x64'])} + {len(data['x64_defaults'])} cases)")


if __name__ == "__main__":
    main()
