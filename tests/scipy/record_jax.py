"""Record jax.scipy's answers for the cases of tests/scipy/cases.py in tests/scipy/jax_values.json: the
special functions' values at both widths, logsumexp's variants, gradients at float64, the dtypes integer
arguments give, and the stats distributions' methods. The suite reads the file; JAX is needed only to
run this again:

    python -m tests.scipy.record_jax
"""

from __future__ import annotations

import json

import jax
import jax.scipy.special as jsp
import jax.scipy.stats as jst
import numpy as np

from tests.scipy import cases as C


def special() -> dict:
    out = {}
    for name, grids in C.SPECIAL.items():
        for dtype in C.FLOATS:
            with jax.enable_x64(dtype == "float64"):
                out[f"{name}/{dtype}"] = C.encode(getattr(jsp, name)(*C.arguments(grids, dtype)))
    for cid, kw in C.LOGSUMEXP.items():
        for dtype in C.FLOATS:
            with jax.enable_x64(dtype == "float64"):
                got = jsp.logsumexp(np.array(C.A, dtype), **C.logsumexp_kwargs(kw, dtype))
            out[f"logsumexp {cid}/{dtype}"] = [C.encode(v) for v in (got if isinstance(got, tuple) else (got,))]
    x = np.array([-30.0, -11.0], np.float32)
    for order in (0, 1, 5):
        out[f"log_ndtr order {order}"] = C.encode(jsp.log_ndtr(x, order))
    return out


def grads() -> dict:
    out = {}
    with jax.enable_x64(True):
        for name, points, argnums in C.GRADS:
            fn = C.function(jsp, name)
            out[name] = [[float(jax.grad(fn, argnums=i)(*p)) for i in argnums] for p in points]
        second = jax.grad(jax.grad(jsp.log_ndtr))
        out["log_ndtr second"] = [float(second(x)) for x in C.SECOND_LOG_NDTR]
        a = np.array(C.A)
        for cid, kw in C.LOGSUMEXP.items():
            if not kw.get("return_sign"):
                kwargs = C.logsumexp_kwargs(kw, np.float64)
                out[f"logsumexp {cid}"] = C.encode(jax.grad(lambda v, k=kwargs: jsp.logsumexp(v, **k).sum())(
                    np.nan_to_num(a, neginf=-3.0, posinf=3.0)))
    return out


def int_dtypes() -> dict:
    out = {}
    for x64 in (False, True):
        with jax.enable_x64(x64):
            for aid, x in C.int_arguments(x64).items():
                for name in C.INT_UNARY:
                    out[f"{name}/{aid}/{x64}"] = str(np.asarray(getattr(jsp, name)(x)).dtype)
                for name in C.INT_BINARY:
                    out[f"{name}/{aid}/{x64}"] = str(np.asarray(getattr(jsp, name)(x, 2.5)).dtype)
    return out


def stats() -> dict:
    out = {}
    for dist, method, args in C.STATS:
        fn = getattr(getattr(jst, dist), method)
        for dtype in C.FLOATS:
            with jax.enable_x64(dtype == "float64"):
                out[f"{dist}.{method}{args[1:]}/{dtype}"] = C.encode(fn(*C.arguments(args, dtype)))
    for dtype in C.FLOATS:
        with jax.enable_x64(dtype == "float64"):
            x, alpha = np.array(C.DIRICHLET_X, dtype), np.array(C.DIRICHLET_ALPHA, dtype)
            out[f"dirichlet/{dtype}"] = [C.encode(jst.dirichlet.logpdf(x, alpha)),
                                         C.encode(jst.dirichlet.pdf(x[:2], alpha))]
    for cid in C.MVN:
        for dtype in C.FLOATS:
            with jax.enable_x64(dtype == "float64"):
                args = C.mvn_arguments(cid, dtype)
                out[f"multivariate_normal {cid}/{dtype}"] = [C.encode(jst.multivariate_normal.logpdf(*args)),
                                                              C.encode(jst.multivariate_normal.pdf(*args))]
    with jax.enable_x64(True):
        x, mean, cov = C.mvn_arguments("matrix", "float64")
        for i, arg in ((1, "mean"), (2, "cov")):
            grad = jax.grad(lambda *a: jst.multivariate_normal.logpdf(*a).sum(), argnums=i)(x, mean, cov)
            out[f"grad multivariate_normal {arg}"] = C.encode(grad)
        for dist, method, points, argnums in C.STATS_GRADS:
            fn = getattr(getattr(jst, dist), method)
            out[f"grad {dist}.{method}"] = [[float(jax.grad(fn, argnums=i)(*p)) for i in argnums] for p in points]
        x, alpha = np.array(C.DIRICHLET_X), np.array(C.DIRICHLET_ALPHA)
        out["grad dirichlet"] = C.encode(jax.grad(lambda a: jst.dirichlet.logpdf(x[:, 1:4], a).sum())(alpha))
    return out


def main() -> None:
    assert jax.__version__ == "0.10.2", f"the recorded values are JAX 0.10.2's, this is {jax.__version__}"
    record = {"special": special(), "grads": grads(), "int dtypes": int_dtypes(), "stats": stats()}
    C.VALUES.write_text(json.dumps(record, indent=None, separators=(",", ":")) + "\n")


if __name__ == "__main__":
    main()
