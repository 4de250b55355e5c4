"""``AdamWOptimizer`` and ``MomentumWOptimizer``
(``optimizers/contrib/weight_decay_optimizers.py``): the decay ``w -= weight_decay * w``
before the extended optimizer's step, on the variables ``decay_var_list`` selects."""

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


def _adam(w, g, m, v, t, lr=0.1, b1=B_09, b2=B_0999, eps=1e-8):
    m = b1 * m + (1 - b1) * g
    v = b2 * v + (1 - b2) * g * g
    return w - lr * np.sqrt(1 - b2**t) / (1 - b1**t) * m / (np.sqrt(v) + eps), (m, v)


def _momentum(w, g, a, t, lr=0.1, mu=B_09):
    a = mu * a + g
    return w - lr * a, (a,)


def _decayed(rule, slots, decayed, wd=0.05):
    w = dict(W0)
    for t, g in enumerate(GRADS, 1):
        for k in w:
            shrunk = w[k] - wd * w[k] if k in decayed else w[k]
            w[k], slots[k] = rule(shrunk, g[k], *slots[k], t)
    return w


@pytest.mark.parametrize("decay_var_list", [None, ["kernel"]], ids=["every", "kernel"])
@pytest.mark.parametrize("name", ["AdamW", "MomentumW"])
def test_the_decay_comes_before_the_step_on_the_chosen_variables(name, decay_var_list) -> None:
    if name == "AdamW":
        opt = fg.train.AdamWOptimizer(0.05, 0.1, decay_var_list=decay_var_list)
        slots = {k: (0 * v, 0 * v) for k, v in W0.items()}
        rule = _adam
    else:
        opt = fg.train.MomentumWOptimizer(0.05, 0.1, 0.9, decay_var_list=decay_var_list)
        slots = {k: (0 * v,) for k, v in W0.items()}
        rule = _momentum
    state = opt.init({k: jnp.asarray(v, jnp.float32) for k, v in W0.items()})
    for g in GRADS:
        c = {k: jnp.asarray(v) for k, v in g.items()}
        state, _ = opt.minimize(lambda p, c: sum(jnp.sum(c[k] * p[k]) for k in p), state, c)
    want = _decayed(rule, slots, decay_var_list or list(W0))
    for k in W0:
        np.testing.assert_allclose(state.params[k], want[k], rtol=1e-5)


def test_the_decay_is_the_extended_optimizers_class() -> None:
    assert issubclass(fg.train.AdamWOptimizer, fg.train.AdamOptimizer)
    assert issubclass(fg.train.MomentumWOptimizer, fg.train.MomentumOptimizer)
