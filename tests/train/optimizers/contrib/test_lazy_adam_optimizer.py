"""``LazyAdamOptimizer`` (``optimizers/contrib/lazy_adam_optimizer.py``): a sparse step
changes the touched rows only, by Adam's rule with the bias correction of every step."""

import jax.numpy as jnp
import numpy as np

import funcgrad as fg

#: 0.9 and 0.999 as float32 holds them, as TensorFlow's rule reads them.
B_09, B_0999 = float(np.float32(0.9)), float(np.float32(0.999))

TABLE = np.arange(8, dtype=np.float64).reshape(4, 2) / 10


def _adam_rows(w, m, v, g, t, lr=0.1, b1=B_09, b2=B_0999, eps=1e-8):
    m = b1 * m + (1 - b1) * g
    v = b2 * v + (1 - b2) * g * g
    return w - lr * np.sqrt(1 - b2**t) / (1 - b1**t) * m / (np.sqrt(v) + eps), m, v


def test_a_sparse_step_is_adam_on_the_touched_rows_alone() -> None:
    opt = fg.train.LazyAdamOptimizer(0.1)
    state = opt.init(jnp.asarray(TABLE, jnp.float32))
    dense = np.full_like(TABLE, 0.5)
    state = opt.apply_gradients([(jnp.asarray(dense, jnp.float32), None)], state)
    w1, m1, v1 = _adam_rows(TABLE, 0 * TABLE, 0 * TABLE, dense, 1)
    ids = jnp.array([2, 2])  # a repeated id: its rows are summed first
    g = fg.IndexedSlices(jnp.array([[0.1, -0.2], [0.3, 0.4]]), ids, TABLE.shape)
    state = opt.apply_gradients([(g, None)], state)
    w2, m2, v2 = _adam_rows(w1[2], m1[2], v1[2], np.array([0.4, 0.2]), 2)
    want_w, want_m, want_v = w1.copy(), m1.copy(), v1.copy()
    want_w[2], want_m[2], want_v[2] = w2, m2, v2
    np.testing.assert_allclose(state.params, want_w, rtol=1e-5, atol=1e-6)  # 0.1 - 0.1 at [0, 1]
    slots = opt.tf_slots(state.opt_state)
    np.testing.assert_allclose(slots["m"], want_m, rtol=1e-5)
    np.testing.assert_allclose(slots["v"], want_v, rtol=1e-5)
