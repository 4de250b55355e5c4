"""``LARSOptimizer`` (``optimizers/contrib/lars_optimizer.py``): its steps against the
trust ratio and TensorFlow's momentum written in NumPy (float64)."""

import jax.numpy as jnp
import numpy as np
import pytest

import funcgrad as fg

#: 0.9 and 0.999 as float32 holds them, as TensorFlow's rule reads them.
B_09, B_0999 = float(np.float32(0.9)), float(np.float32(0.999))

W0 = {"kernel": np.array([0.5, -1.0, 2.0]), "bias": np.array([0.3, -0.4])}
GRADS = [
    {"kernel": np.array([0.3, -0.2, 0.1]), "bias": np.array([0.2, 0.1])},
    {"kernel": np.array([-0.4, 0.5, 0.2]), "bias": np.array([-0.3, 0.6])},
]


def _lars(w, grads, skip, nesterov, lr=0.5, mu=B_09, wd=0.01, eeta=0.1, eps=1e-4):
    a = {k: np.zeros_like(v) for k, v in w.items()}
    for g in grads:
        new = {}
        for k in w:
            wn, gn = np.linalg.norm(w[k]), np.linalg.norm(g[k])
            r = eeta * wn / (gn + wd * wn + eps) if wn > 0 and gn > 0 and k not in skip else 1.0
            a[k] = mu * a[k] + g[k]
            step = g[k] + mu * a[k] if nesterov else a[k]
            new[k] = w[k] - lr * r * step
        w = new
    return w


@pytest.mark.parametrize("nesterov", [False, True], ids=["momentum", "nesterov"])
@pytest.mark.parametrize("skip", [None, ["bias"]], ids=["every", "skip_bias"])
def test_dense_steps_are_the_trust_ratio_times_momentum(skip, nesterov) -> None:
    opt = fg.train.LARSOptimizer(
        0.5, momentum=0.9, weight_decay=0.01, eeta=0.1, epsilon=1e-4, skip_list=skip,
        use_nesterov=nesterov,
    )  # fmt: skip
    state = opt.init({k: jnp.asarray(v, jnp.float32) for k, v in W0.items()})
    for g in GRADS:
        c = {k: jnp.asarray(v) for k, v in g.items()}
        state, _ = opt.minimize(lambda p, c: sum(jnp.sum(c[k] * p[k]) for k in p), state, c)
    want = _lars(W0, GRADS, skip or [], nesterov)
    for k in W0:
        np.testing.assert_allclose(state.params[k], want[k], rtol=1e-5)
