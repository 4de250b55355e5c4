"""``AdaMaxOptimizer`` (``optimizers/contrib/adamax.py``): its steps against the rule
written in NumPy (float64), dense and row by row."""

import jax.numpy as jnp
import numpy as np

import funcgrad as fg

#: 0.9 and 0.999 as float32 holds them, as TensorFlow's rule reads them.
B_09, B_0999 = float(np.float32(0.9)), float(np.float32(0.999))

W0 = np.array([0.5, -1.0, 2.0])
GRADS = [np.array([0.3, -0.2, 0.1]), np.array([-0.4, 0.5, 0.2]), np.array([0.1, 0.1, -0.6])]


def _adamax(w, grads, lr=0.1, b1=B_09, b2=B_0999, eps=1e-8):
    m, v = np.zeros_like(w), np.zeros_like(w)
    for t, g in enumerate(grads, 1):
        m = b1 * m + (1 - b1) * g
        v = np.maximum(b2 * v, np.abs(g))
        w = w - lr / (1 - b1**t) * m / (v + eps)
    return w, m, v


def test_dense_steps_are_adamaxs_rule() -> None:
    opt = fg.train.AdaMaxOptimizer(0.1)
    state = opt.init({"w": jnp.asarray(W0, jnp.float32)})
    for g in GRADS:
        state, _ = opt.minimize(lambda p, c: jnp.sum(c * p["w"]), state, jnp.asarray(g))
    w, m, v = _adamax(W0, GRADS)
    np.testing.assert_allclose(state.params["w"], w, rtol=1e-5)
    slots = opt.tf_slots(state.opt_state)
    np.testing.assert_allclose(slots["m"]["w"], m, rtol=1e-5)
    np.testing.assert_allclose(slots["v"]["w"], v, rtol=1e-5)


def test_a_sparse_step_moves_the_touched_rows_only() -> None:
    opt = fg.train.AdaMaxOptimizer(0.1)
    state = opt.init(jnp.asarray(W0, jnp.float32))
    g = fg.IndexedSlices(jnp.array([0.3, 0.1]), jnp.array([0, 2]), (3,))
    state = opt.apply_gradients([(g, None)], state)
    w, _, _ = _adamax(W0, [np.array([0.3, 0.0, 0.1])])
    np.testing.assert_allclose(state.params, w, rtol=1e-5)
    assert float(state.params[1]) == -1.0
