"""The TF-only optax transformations, on their own and in optax.chain."""

import jax.numpy as jnp
import numpy as np
import optax
import pytest

import funcgrad as fg


def test_scale_by_tf_adam_state_is_named() -> None:
    tx = fg.train.scale_by_tf_adam()
    state = tx.init(jnp.zeros(2))
    assert isinstance(state, fg.train.ScaleByTfAdamState)
    _, state = tx.update(jnp.ones(2), state)
    np.testing.assert_allclose(state.mu, [0.1, 0.1], rtol=1e-6)
    np.testing.assert_allclose(state.nu, [0.001, 0.001], rtol=1e-4)


def test_ftrl_with_l1_zeroes_small_linear_terms() -> None:
    tx = fg.train.tf_ftrl(0.1, l1=1.0)
    w = jnp.array([0.0, 0.0])
    updates, state = tx.update(jnp.array([0.5, 3.0]), tx.init(w), w)
    assert isinstance(state, fg.train.TfFtrlState)
    # linear = g (w = 0); |0.5| <= l1 -> 0; else (l1 sign(z) - z) / (sqrt(n) / lr)
    expected_1 = (1.0 - 3.0) / (np.sqrt(0.1 + 9.0) / 0.1)
    np.testing.assert_allclose(updates, [0.0, expected_1], rtol=1e-6)


def test_proximal_l1_shrinks_towards_zero_and_stops_there() -> None:
    tx = fg.train.tf_proximal_gradient_descent(0.5, l1=1.0)
    w = jnp.array([2.0, 0.3, -2.0])
    updates, _ = tx.update(jnp.zeros(3), tx.init(w), w)
    np.testing.assert_allclose(w + updates, [1.5, 0.0, -1.5])


def test_transforms_chain_with_optax() -> None:
    tx = optax.chain(optax.clip(0.5), fg.train.tf_proximal_adagrad(1.0, 0.1))
    w = jnp.array([1.0])
    updates, state = tx.update(jnp.array([4.0]), tx.init(w), w)
    assert isinstance(state[1], fg.train.TfProximalAdagradState)
    np.testing.assert_allclose(updates, [-0.5 / np.sqrt(0.1 + 0.25)], rtol=1e-6)


@pytest.mark.parametrize(
    "tx",
    [
        pytest.param(fg.train.tf_ftrl(0.1), id="ftrl"),
        pytest.param(fg.train.tf_proximal_gradient_descent(0.1), id="proximal_sgd"),
        pytest.param(fg.train.tf_proximal_adagrad(0.1), id="proximal_adagrad"),
    ],
)
def test_transforms_that_set_the_variable_need_params(tx) -> None:
    w = jnp.ones(2)
    with pytest.raises(ValueError, match=r"fg\.train\.tf_\w+: update needs params"):
        tx.update(w, tx.init(w))
