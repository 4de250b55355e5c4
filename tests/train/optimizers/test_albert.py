"""``LAMBOptimizer`` (``optimizers/albert.py``): BERT's update scaled by the trust ratio
over the whole variable, against its rule in NumPy (float64)."""

import jax.numpy as jnp
import numpy as np
import pytest

import funcgrad as fg

W0 = {"kernel": np.array([[0.5, -1.0], [2.0, 0.3]]), "bias": np.array([0.3, -0.4])}
GRADS = [
    {"kernel": np.array([[0.3, -0.2], [0.1, 0.4]]), "bias": np.array([0.2, 0.1])},
    {"kernel": np.array([[-0.4, 0.5], [0.2, -0.1]]), "bias": np.array([-0.3, 0.6])},
]


def _lamb(
    w,
    grads,
    adapt,
    decayed,
    lr=0.1,
    wd=0.01,
    b1=0.9,
    b2=0.999,
    eps=1e-6,
):
    m, v = 0 * w, 0 * w
    for g in grads:
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        u = m / (np.sqrt(v) + eps) + (wd * w if decayed else 0.0)
        wn, un = np.linalg.norm(w.ravel()), np.linalg.norm(u.ravel())
        r = wn / un if adapt and wn > 0 and un > 0 else 1.0
        w = w - r * lr * u
    return w


@pytest.mark.parametrize(
    ("adaptation", "adapted"),
    [(None, ["kernel"]), (["kernel"], ["bias"])],
    ids=["weight_decay_exclusions_serve", "own_exclusions"],
)
def test_steps_are_lambs_rule_with_its_exclusions(adaptation, adapted) -> None:
    opt = fg.train.LAMBOptimizer(
        0.1, weight_decay_rate=0.01, exclude_from_weight_decay=["bias"],
        exclude_from_layer_adaptation=adaptation,
    )  # fmt: skip
    state = opt.init({k: jnp.asarray(v, jnp.float32) for k, v in W0.items()})
    for g in GRADS:
        c = {k: jnp.asarray(v) for k, v in g.items()}
        state, _ = opt.minimize(lambda p, c: sum(jnp.sum(c[k] * p[k]) for k in p), state, c)
    for k in W0:
        want = _lamb(W0[k], [g[k] for g in GRADS], k in adapted, decayed=k != "bias")
        np.testing.assert_allclose(state.params[k], want, rtol=1e-5)
