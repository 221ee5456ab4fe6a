"""Record JAX's results for the calls in sorting_cases.py into sorting_jax_values.json (run by hand; the
suite reads the file, since compiling each of JAX's functions costs it seconds):
python tests/numpy/record_sorting_jax.py
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
OUT = HERE / "sorting_jax_values.json"


def main() -> None:
    import jax
    import jax.numpy as jnp
    import numpy as np

    sys.path.insert(0, str(HERE.parent.parent))
    from tests.numpy.sorting_cases import CASES, outputs

    rows = []
    with jax.enable_x64(False):
        for case in CASES:
            found = [np.asarray(o) for o in outputs(case, jnp, jax.lax)]
            rows.append(json.dumps({"name": case.name, "outputs": [
                {"dtype": o.dtype.name, "shape": list(o.shape), "value": o.ravel().tolist()} for o in found]}))
    body = ",\n".join(rows)  # one case a line
    OUT.write_text(f'{{"jax": "{jax.__version__}", "cases": [\n{body}\n]}}\n')


if __name__ == "__main__":
    main()
