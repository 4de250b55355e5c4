"""``AdamWeightDecayOptimizer`` (``optimizers/bert.py``): BERT's Adam without bias
correction and with decoupled decay, against its rule in NumPy (float64)."""

import jax.numpy as jnp
import numpy as np

import funcgrad as fg

W0 = {"kernel": np.array([0.5, -1.0, 2.0]), "LayerNorm": {"gamma": np.array([1.0, 0.8])}}
GRADS = [
    {"kernel": np.array([0.3, -0.2, 0.1]), "LayerNorm": {"gamma": np.array([0.2, 0.1])}},
    {"kernel": np.array([-0.4, 0.5, 0.2]), "LayerNorm": {"gamma": np.array([-0.3, 0.6])}},
]


def _bert(
    w,
    grads,
    decayed,
    lr=0.1,
    wd=0.2,
    b1=0.9,
    b2=0.999,
    eps=1e-6,
):
    m, v = 0 * w, 0 * w
    for g in grads:
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        update = m / (np.sqrt(v) + eps) + (wd * w if decayed else 0.0)
        w = w - lr * update
    return w


def test_steps_are_berts_rule_and_the_exclusions_keep_their_decay_off() -> None:
    opt = fg.train.AdamWeightDecayOptimizer(
        0.1, weight_decay_rate=0.2, exclude_from_weight_decay=["LayerNorm", "bias"]
    )
    state = opt.init({"kernel": jnp.asarray(W0["kernel"]), "LayerNorm": {
        "gamma": jnp.asarray(W0["LayerNorm"]["gamma"])}})  # fmt: skip

    def loss(p, c):
        return jnp.sum(c["kernel"] * p["kernel"]) + jnp.sum(
            c["LayerNorm"] * p["LayerNorm"]["gamma"]
        )

    for g in GRADS:
        c = {"kernel": jnp.asarray(g["kernel"]), "LayerNorm": jnp.asarray(g["LayerNorm"]["gamma"])}
        state, _ = opt.minimize(loss, state, c)
    kernel = _bert(W0["kernel"], [g["kernel"] for g in GRADS], decayed=True)
    gamma = _bert(W0["LayerNorm"]["gamma"], [g["LayerNorm"]["gamma"] for g in GRADS], False)
    np.testing.assert_allclose(state.params["kernel"], kernel, rtol=1e-5)
    np.testing.assert_allclose(state.params["LayerNorm"]["gamma"], gamma, rtol=1e-5)
