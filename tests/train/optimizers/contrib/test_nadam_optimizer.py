"""``NadamOptimizer`` (``optimizers/contrib/nadam_optimizer.py``): its steps against
TensorFlow's ``ApplyAdam(use_nesterov=True)`` written in NumPy (float64)."""

import jax.numpy as jnp
import numpy as np

import funcgrad as fg

#: 0.9 and 0.999 as float32 holds them, as TensorFlow's rule reads them.
B_09, B_0999 = float(np.float32(0.9)), float(np.float32(0.999))

W0 = np.array([0.5, -1.0, 2.0])
GRADS = [np.array([0.3, -0.2, 0.1]), np.array([-0.4, 0.5, 0.2]), np.array([0.1, 0.1, -0.6])]


def _nadam(
    w,
    grads,
    lr=0.1,
    b1=B_09,
    b2=B_0999,
    eps=1e-8,
    m=None,
    v=None,
    t0=0,
):
    m = np.zeros_like(w) if m is None else m
    v = np.zeros_like(w) if v is None else v
    for t, g in enumerate(grads, t0 + 1):
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        alpha = lr * np.sqrt(1 - b2**t) / (1 - b1**t)
        w = w - alpha * (b1 * m + (1 - b1) * g) / (np.sqrt(v) + eps)
    return w, m, v


def test_dense_steps_are_nesterov_adam() -> None:
    opt = fg.train.NadamOptimizer(0.1)
    state = opt.init({"w": jnp.asarray(W0, jnp.float32)})
    for g in GRADS:
        state, _ = opt.minimize(lambda p, c: jnp.sum(c * p["w"]), state, jnp.asarray(g))
    np.testing.assert_allclose(state.params["w"], _nadam(W0, GRADS)[0], rtol=1e-5)


def test_a_sparse_step_decays_every_moment_and_moves_the_touched_rows() -> None:
    opt = fg.train.NadamOptimizer(0.1)
    state = opt.init(jnp.asarray(W0, jnp.float32))
    state = opt.apply_gradients([(jnp.asarray(GRADS[0], jnp.float32), None)], state)
    before = np.asarray(state.params)
    g = fg.IndexedSlices(jnp.array([-0.4, 0.2]), jnp.array([0, 2]), (3,))
    state = opt.apply_gradients([(g, None)], state)
    w1, m1, v1 = _nadam(W0, GRADS[:1])
    w2, m2, v2 = _nadam(w1, [np.array([-0.4, 0.0, 0.2])], m=m1, v=v1, t0=1)
    np.testing.assert_allclose(state.params[::2], w2[::2], rtol=1e-5)
    assert float(state.params[1]) == before[1]  # untouched row: its moments decay only
    slots = opt.tf_slots(state.opt_state)
    np.testing.assert_allclose(slots["m"], m2, rtol=1e-5)
    np.testing.assert_allclose(slots["v"], v2, rtol=1e-5)
