"""JAX's autodiff cookbook (https://docs.jax.dev/en/latest/notebooks/autodiff_cookbook.html), ported.

Its code runs as the cookbook writes it but for the import lines (`import ember as jax`, `import
ember.numpy as jnp`, `from ember import ...`) and these: NumPy's generator where it draws from
`jax.random`; `np.allclose` where it calls `jnp.allclose` (a reduction to a Python bool, which
ember.numpy does not have); `jnp.asarray` around the tuples vjp returns where it stacks them
(ember.numpy's stacking functions take arrays, not tuples); an `atol` where it compares a loop of
vjps with their vmap in float32 (the numpy backend sums in another order); `%timeit` lines became
plain calls. After each section its results are checked against NumPy (closed forms of the same
derivatives, in float64) and finite differences.

    python examples/autodiff_cookbook.py
"""

from __future__ import annotations

import numpy as np

import ember as jax
import ember.numpy as jnp
from ember import grad, jacfwd, jacrev, jit, jvp, value_and_grad, vjp, vmap

TOL = dict(rtol=2e-5, atol=2e-6)  # float32 results against float64 references


def _sigmoid(z):
    return 0.5 * (np.tanh(z / 2) + 1)


def gradients() -> dict:
    """Gradients: grad of tanh, to third order."""
    grad_tanh = grad(jnp.tanh)
    print(grad_tanh(2.0))
    print(grad(grad(jnp.tanh))(2.0))
    print(grad(grad(grad(jnp.tanh)))(2.0))
    t = np.tanh(2.0)
    np.testing.assert_allclose([grad_tanh(2.0), grad(grad(jnp.tanh))(2.0), grad(grad(grad(jnp.tanh)))(2.0)],
                               [1 - t**2, -2 * t * (1 - t**2), (1 - t**2) * (6 * t**2 - 2)], **TOL)
    return {"grad_tanh": grad_tanh(2.0)}


def sigmoid(x):
    return 0.5 * (jnp.tanh(x / 2) + 1)


# Outputs probability of a label being true.
def predict(W, b, inputs):
    return sigmoid(jnp.dot(inputs, W) + b)


# Build a toy dataset.
inputs = jnp.array([[0.52, 1.12, 0.77],
                    [0.88, -1.08, 0.15],
                    [0.52, 0.06, -1.30],
                    [0.74, -2.49, 1.39]])
targets = jnp.array([True, True, False, True])


# Training loss is the negative log-likelihood of the training examples.
def loss(W, b):
    preds = predict(W, b, inputs)
    label_probs = preds * targets + (1 - preds) * (1 - targets)
    return -jnp.sum(jnp.log(label_probs))


def loss2(params_dict):
    preds = predict(params_dict['W'], params_dict['b'], inputs)
    label_probs = preds * targets + (1 - preds) * (1 - targets)
    return -jnp.sum(jnp.log(label_probs))


def logistic_regression(W, b, rng) -> dict:
    """grad with argnums, pytrees and value_and_grad, checked against finite differences."""
    # Differentiate `loss` with respect to the first positional argument:
    W_grad = grad(loss, argnums=0)(W, b)
    print(f'{W_grad=}')
    # Since argnums=0 is the default, this does the same thing:
    W_grad = grad(loss)(W, b)
    print(f'{W_grad=}')
    # But you can choose different values too, and drop the keyword:
    b_grad = grad(loss, 1)(W, b)
    print(f'{b_grad=}')
    # Including tuple values
    W_grad, b_grad = grad(loss, (0, 1))(W, b)
    print(f'{W_grad=}')
    print(f'{b_grad=}')
    print(grad(loss2)({'W': W, 'b': b}))
    loss_value, Wb_grad = value_and_grad(loss, (0, 1))(W, b)
    print('loss value', loss_value)
    print('loss value', loss(W, b))

    # Set a step size for finite differences calculations
    eps = 1e-4
    # Check b_grad with scalar finite differences
    b_grad_numerical = (loss(W, b + eps / 2.) - loss(W, b - eps / 2.)) / eps
    print('b_grad_numerical', b_grad_numerical)
    print('b_grad_autodiff', grad(loss, 1)(W, b))
    # Check W_grad with finite differences in a random direction
    vec = rng.standard_normal(W.shape).astype(np.float32)
    unitvec = vec / jnp.sqrt(jnp.vdot(vec, vec))
    W_grad_numerical = (loss(W + eps / 2. * unitvec, b) - loss(W - eps / 2. * unitvec, b)) / eps
    print('W_dirderiv_numerical', W_grad_numerical)
    print('W_dirderiv_autodiff', jnp.vdot(grad(loss)(W, b), unitvec))

    x, t = np.asarray(inputs, np.float64), np.asarray(targets, np.float64)
    residual = _sigmoid(x @ W.astype(np.float64) + np.float64(b)) - t  # d loss / d logits
    np.testing.assert_allclose(W_grad, x.T @ residual, **TOL)
    np.testing.assert_allclose(b_grad, residual.sum(), **TOL)
    np.testing.assert_allclose(grad(loss2)({'W': W, 'b': b})['W'], W_grad, **TOL)
    np.testing.assert_allclose(Wb_grad[1], b_grad, **TOL)
    np.testing.assert_allclose(b_grad_numerical, b_grad, rtol=2e-2)  # float32 differences at eps 1e-4
    np.testing.assert_allclose(W_grad_numerical, np.vdot(W_grad, unitvec), rtol=2e-2)
    return {"W_grad": W_grad, "b_grad": b_grad, "loss": loss_value}


def jacobians_and_hessians(W, b) -> dict:
    """jacfwd and jacrev agree; hessian is jacfwd(jacrev); checked against the closed forms."""
    # Isolate the function from the weight matrix to the predictions
    f = lambda W: predict(W, b, inputs)  # noqa: E731

    J = jacfwd(f)(W)
    print("jacfwd result, with shape", J.shape)
    print(J)

    J = jacrev(f)(W)
    print("jacrev result, with shape", J.shape)
    print(J)

    def predict_dict(params, inputs):
        return predict(params['W'], params['b'], inputs)

    J_dict = jacrev(predict_dict)({'W': W, 'b': b}, inputs)
    for k, v in J_dict.items():
        print(f"Jacobian from {k} to logits is")
        print(v)

    def hessian(f):
        return jacfwd(jacrev(f))

    H = hessian(f)(W)
    print("hessian, with shape", H.shape)
    print(H)

    x = np.asarray(inputs, np.float64)
    s = _sigmoid(x @ W.astype(np.float64) + np.float64(b))
    J_ref = (s * (1 - s))[:, None] * x
    H_ref = (s * (1 - s) * (1 - 2 * s))[:, None, None] * x[:, :, None] * x[:, None, :]
    np.testing.assert_allclose(jacfwd(f)(W), J_ref, **TOL)
    np.testing.assert_allclose(J, J_ref, **TOL)
    np.testing.assert_allclose(J_dict['W'], J_ref, **TOL)
    np.testing.assert_allclose(H, H_ref, **TOL)
    np.testing.assert_allclose(jax.hessian(f)(W), H_ref, **TOL)
    return {"J": J, "H": H}


def jvps_and_vjps(W, b, rng) -> dict:
    """Push a vector forward with jvp, pull a covector back with vjp: the same Jacobian."""
    # Isolate the function from the weight matrix to the predictions
    f = lambda W: predict(W, b, inputs)  # noqa: E731

    v = rng.standard_normal(W.shape).astype(np.float32)
    # Push forward the vector `v` along `f` evaluated at `W`
    y, u = jvp(f, (W,), (v,))

    y, vjp_fun = vjp(f, W)
    u2 = rng.standard_normal(y.shape).astype(np.float32)
    # Pull back the covector `u` along `f` evaluated at `W`
    v2 = vjp_fun(u2)

    J = np.asarray(jacrev(f)(W), np.float64)
    np.testing.assert_allclose(u, J @ v, **TOL)
    np.testing.assert_allclose(v2[0], J.T @ u2, **TOL)
    print("jvp", u, "vjp", v2[0])
    return {"jvp": u, "vjp": v2[0]}


# Hessian-vector products using both forward- and reverse-mode
def hvp(f, primals, tangents):
    return jvp(grad(f), primals, tangents)[1]


# Reverse-over-forward
def hvp_revfwd(f, primals, tangents):
    g = lambda primals: jvp(f, primals, tangents)[1]  # noqa: E731
    return grad(g)(primals)


# Reverse-over-reverse, only works for single arguments
def hvp_revrev(f, primals, tangents):
    x, = primals
    v, = tangents
    return grad(lambda x: jnp.vdot(grad(f)(x), v))(x)


def hessian_vector_products(rng) -> dict:
    """Forward-over-reverse, reverse-over-forward and reverse-over-reverse agree with the Hessian."""
    def f(X):
        return jnp.sum(jnp.tanh(X)**2)

    def hessian(f):
        return jacfwd(jacrev(f))

    X = rng.standard_normal((30, 40)).astype(np.float32)
    V = rng.standard_normal((30, 40)).astype(np.float32)

    ans1 = hvp(f, (X,), (V,))
    ans2 = jnp.tensordot(hessian(f)(X), V, 2)
    print(np.allclose(ans1, ans2, 1e-4, 1e-4))

    print("Forward over reverse")
    ans_fwdrev = jit(hvp, static_argnums=0)(f, (X,), (V,))
    print("Reverse over forward")
    ans_revfwd = jit(hvp_revfwd, static_argnums=0)(f, (X,), (V,))
    print("Reverse over reverse")
    ans_revrev = jit(hvp_revrev, static_argnums=0)(f, (X,), (V,))

    t = np.tanh(X.astype(np.float64))
    want = 2 * (1 - t**2) * (1 - 3 * t**2) * V  # the Hessian of sum(tanh(X)**2) is diagonal
    assert np.allclose(ans1, ans2, 1e-4, 1e-4)
    for got in (ans1, ans2, ans_fwdrev, ans_revfwd[0], ans_revrev):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    return {"hvp": ans1}


def jacobian_matrix_products(W, b, rng) -> dict:
    """Looping over vjp/jvp and vmapping them give the same products; Jacobians built from them."""
    # Isolate the function from the weight matrix to the predictions
    f = lambda W: predict(W, b, inputs)  # noqa: E731
    y = f(W)

    # Pull back the covectors `m_i` along `f`, evaluated at `W`, for all `i`.
    # First, use a list comprehension to loop over rows in the matrix M.
    def loop_mjp(f, x, M):
        y, vjp_fun = vjp(f, x)
        return jnp.vstack([jnp.asarray(vjp_fun(mi)) for mi in M])

    # Now, use vmap to build a computation that does a single fast matrix-matrix
    # multiply, rather than an outer loop over vector-matrix multiplies.
    def vmap_mjp(f, x, M):
        y, vjp_fun = vjp(f, x)
        outs, = vmap(vjp_fun)(M)
        return outs

    num_covecs = 128
    U = rng.standard_normal((num_covecs,) + y.shape).astype(np.float32)

    loop_vs = loop_mjp(f, W, M=U)
    vmap_vs = vmap_mjp(f, W, M=U)
    assert np.allclose(loop_vs, vmap_vs, atol=1e-6), 'Vmap and non-vmapped Matrix-Jacobian Products should be identical'

    def loop_jmp(f, W, M):
        # jvp immediately returns the primal and tangent values as a tuple,
        # so we'll compute and select the tangents in a list comprehension
        return jnp.vstack([jvp(f, (W,), (mi,))[1] for mi in M])

    def vmap_jmp(f, W, M):
        _jvp = lambda s: jvp(f, (W,), (s,))[1]  # noqa: E731
        return vmap(_jvp)(M)

    num_vecs = 128
    S = rng.standard_normal((num_vecs,) + W.shape).astype(np.float32)

    jmp_loop = loop_jmp(f, W, M=S)
    jmp_vmap = vmap_jmp(f, W, M=S)
    assert np.allclose(jmp_loop, jmp_vmap, atol=1e-4, rtol=1e-4), \
        'Vmap and non-vmapped Jacobian-Matrix products should be identical'

    def our_jacrev(f):
        def jacfun(x):
            y, vjp_fun = vjp(f, x)
            # Use vmap to do a matrix-Jacobian product.
            # Here, the matrix is the Euclidean basis, so we get all
            # entries in the Jacobian at once.
            J, = vmap(vjp_fun, in_axes=0)(jnp.eye(len(y)))
            return J
        return jacfun

    assert np.allclose(jacrev(f)(W), our_jacrev(f)(W)), 'Incorrect reverse-mode Jacobian results!'

    def our_jacfwd(f):
        def jacfun(x):
            _jvp = lambda s: jvp(f, (x,), (s,))[1]  # noqa: E731
            Jt = vmap(_jvp, in_axes=1)(jnp.eye(len(x)))
            return jnp.transpose(Jt)
        return jacfun

    assert np.allclose(jacfwd(f)(W), our_jacfwd(f)(W)), 'Incorrect forward-mode Jacobian results!'

    J = np.asarray(jacrev(f)(W), np.float64)
    np.testing.assert_allclose(vmap_vs, U @ J, **TOL)
    np.testing.assert_allclose(jmp_vmap, S @ J.T, **TOL)
    print("matrix-Jacobian products", vmap_vs.shape, "Jacobian-matrix products", jmp_vmap.shape)
    return {"mjp": vmap_vs, "jmp": jmp_vmap}


def main() -> dict:
    """Every section of the cookbook, in order; returns what each computed."""
    rng = np.random.default_rng(0)  # the cookbook's random.key(0) and its splits
    W = rng.standard_normal(3).astype(np.float32)
    b = np.float32(rng.standard_normal())
    results = gradients()
    results |= logistic_regression(W, b, rng)
    results |= jacobians_and_hessians(W, b)
    results |= jvps_and_vjps(W, b, rng)
    results |= hessian_vector_products(rng)
    results |= jacobian_matrix_products(W, b, rng)
    return results


if __name__ == "__main__":
    main()
