"""``TF1Optimizer``: the one base, as the classes written on it use it."""

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import funcgrad as fg

#: ``tf.train``'s optimizers, whose dense step is an optax chain.
CHAINED = [
    pytest.param(lambda: fg.train.GradientDescentOptimizer(0.1), id="sgd"),
    pytest.param(lambda: fg.train.MomentumOptimizer(0.1, 0.9), id="momentum"),
    pytest.param(lambda: fg.train.MomentumOptimizer(0.1, 0.9, use_nesterov=True), id="nesterov"),
    pytest.param(lambda: fg.train.AdamOptimizer(0.1), id="adam"),
    pytest.param(lambda: fg.train.LazyAdamOptimizer(0.1), id="lazy_adam"),
    pytest.param(lambda: fg.train.RMSPropOptimizer(0.1, momentum=0.5), id="rmsprop"),
    pytest.param(
        lambda: fg.train.RMSPropOptimizer(0.1, momentum=0.5, centered=True), id="rmsprop_centered"
    ),
    pytest.param(lambda: fg.train.AdagradOptimizer(0.1), id="adagrad"),
    pytest.param(lambda: fg.train.AdadeltaOptimizer(1.0), id="adadelta"),
    pytest.param(
        lambda: fg.train.FtrlOptimizer(0.1, l1_regularization_strength=0.01, beta=0.1), id="ftrl"
    ),
    pytest.param(lambda: fg.train.ProximalGradientDescentOptimizer(0.1, 0.01, 0.02), id="prox_sgd"),
    pytest.param(lambda: fg.train.ProximalAdagradOptimizer(0.1, 0.1, 0.01), id="prox_adagrad"),
]

IDS = jnp.array([0, 2, 2, 1])


def _loss(p):
    h = jnp.tanh(p["E"][IDS] @ p["W"] + p["b"][None, :])
    return jnp.sum((h - 0.3) ** 2) + 0.1 * jnp.sum(p["W"] ** 2)


def _params():
    rng = np.random.default_rng(0)
    return {
        "E": jnp.asarray(rng.normal(size=(5, 3)), jnp.float32),
        "W": jnp.asarray(rng.normal(size=(3, 2)), jnp.float32),
        "b": jnp.asarray(rng.normal(size=(2,)), jnp.float32),
    }


def _by_rules(opt):
    """``opt``'s class with its dense rule written again (``super()``'s): stepped by the
    rules, variable by variable, not by its chain."""

    class ByRules(type(opt)):
        def _apply_dense(self, grad, var, slots, step):
            return super()._apply_dense(grad, var, slots, step)

    rules = object.__new__(ByRules)
    rules.__dict__.update({k: v for k, v in opt.__dict__.items() if k != "tx"})
    return rules


@pytest.mark.parametrize("make", CHAINED)
def test_a_classs_rules_are_the_rules_of_its_chain(make) -> None:
    """The rules a class writes (``_apply_dense``, ``_apply_sparse``, ``_prepare``,
    ``_finish``) step as its optax chain does, dense and sparse, and name the same slots."""
    chain = make()
    rules = _by_rules(chain)
    assert isinstance(rules.tx.init(_params()).inner_state, fg.train.TF1OptimizerState)
    states = [opt.init(_params()) for opt in (chain, rules)]
    for _ in range(3):
        states = [
            jax.jit(opt.minimize, static_argnums=0)(_loss, s)[0]
            for opt, s in zip((chain, rules), states, strict=True)
        ]
    chex.assert_trees_all_close(states[1].params, states[0].params, rtol=2e-6, atol=1e-7)
    slots = [opt.tf_slots(s.opt_state) for opt, s in zip((chain, rules), states, strict=True)]
    assert list(slots[0]) == [k for k in list(slots[1]) if k in slots[0]]
    for key in slots[0]:
        chex.assert_trees_all_close(slots[1][key], slots[0][key], rtol=2e-6, atol=1e-7)
    powers = [opt.tf_non_slots(s.opt_state) for opt, s in zip((chain, rules), states, strict=True)]
    chex.assert_trees_all_close(powers[1], powers[0])
    assert chain.tf_names(_params()) == rules.tf_names(_params())
