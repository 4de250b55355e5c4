"""``AddSignOptimizer`` (``optimizers/contrib/addsign.py``): its steps against the rule
written in NumPy (float64), with and without a sign decay."""

import jax.numpy as jnp
import numpy as np
import pytest

import funcgrad as fg

#: 0.9 and 0.999 as float32 holds them, as TensorFlow's rule reads them.
B_09, B_0999 = float(np.float32(0.9)), float(np.float32(0.999))

W0 = np.array([0.5, -1.0, 2.0])
GRADS = [np.array([0.3, -0.2, 0.1]), np.array([-0.4, 0.5, 0.2]), np.array([0.1, 0.1, -0.6])]


def _addsign(w, grads, decay, lr=0.1, alpha=1.0, beta=B_09):
    m = np.zeros_like(w)
    for t, g in enumerate(grads):  # the decay reads global_step before the step
        m = beta * m + (1 - beta) * g
        w = w - lr * (alpha + decay(t) * np.sign(g) * np.sign(m)) * g
    return w


@pytest.mark.parametrize("decayed", [False, True], ids=["no_decay", "linear_decay"])
def test_dense_steps_are_addsigns_rule(decayed) -> None:
    fn = fg.train.get_linear_decay_fn(4) if decayed else None
    opt = fg.train.AddSignOptimizer(0.1, sign_decay_fn=fn)
    state = opt.init({"w": jnp.asarray(W0, jnp.float32)})
    for g in GRADS:
        state, _ = opt.minimize(lambda p, c: jnp.sum(c * p["w"]), state, jnp.asarray(g))
    want = _addsign(W0, GRADS, (lambda t: max(0.0, (4 - t) / 4)) if decayed else (lambda t: 1.0))
    np.testing.assert_allclose(state.params["w"], want, rtol=1e-5)


def test_a_sparse_step_moves_the_touched_rows_only() -> None:
    opt = fg.train.AddSignOptimizer(0.1)
    state = opt.init(jnp.asarray(W0, jnp.float32))
    g = fg.IndexedSlices(jnp.array([0.3, 0.1]), jnp.array([0, 2]), (3,))
    state = opt.apply_gradients([(g, None)], state)
    want = _addsign(W0, [np.array([0.3, 0.0, 0.1])], lambda t: 1.0)
    np.testing.assert_allclose(state.params, want, rtol=1e-5)
    assert float(state.params[1]) == -1.0
