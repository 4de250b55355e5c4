"""The TF1 optimizers: closed-form first steps and their argument checks.

TensorFlow's own trajectories are compared in tests/parity; these closed forms hold
without TensorFlow installed.
"""

import math

import jax.numpy as jnp
import numpy as np
import pytest

import funcgrad as fg

G = np.array([0.5, -2.0], np.float32)
W = np.array([1.0, 1.0], np.float32)


def _first_step(opt):
    state = opt.init(jnp.asarray(W))
    return np.asarray(opt.apply_gradients([(jnp.asarray(G), None)], state).params)


def test_adam_first_step_uses_epsilon_hat_unlike_optax() -> None:
    lr, b2, eps = 0.1, 0.999, 0.01
    got = _first_step(fg.train.AdamOptimizer(lr, beta2=b2, epsilon=eps))
    # m = (1 - b1) g, v = (1 - b2) g^2, alpha = lr sqrt(1 - b2) / (1 - b1)
    expected = W - lr * math.sqrt(1 - b2) * G / (math.sqrt(1 - b2) * np.abs(G) + eps)
    np.testing.assert_allclose(got, expected, rtol=1e-5)
    # optax.adam's form adds eps to the bias-corrected sqrt(v_hat) = |g| instead:
    assert not np.allclose(got, W - lr * G / (np.abs(G) + eps), rtol=1e-3)


@pytest.mark.parametrize("momentum", [0.0, 0.5], ids=["plain", "momentum"])
def test_rmsprop_first_step_starts_the_mean_square_at_one(momentum) -> None:
    got = _first_step(fg.train.RMSPropOptimizer(0.1, decay=0.9, momentum=momentum))
    np.testing.assert_allclose(got, W - 0.1 * G / np.sqrt(0.9 + 0.1 * G**2), rtol=1e-6)


def test_centered_rmsprop_subtracts_the_squared_mean_gradient() -> None:
    got = _first_step(fg.train.RMSPropOptimizer(0.1, centered=True))
    np.testing.assert_allclose(
        got, W - 0.1 * G / np.sqrt(0.9 + 0.1 * G**2 - (0.1 * G) ** 2 + 1e-10), rtol=1e-6
    )


def test_nesterov_momentum_first_step() -> None:
    got = _first_step(fg.train.MomentumOptimizer(0.1, 0.9, use_nesterov=True))
    np.testing.assert_allclose(got, W - 0.1 * (G + 0.9 * G), rtol=1e-6)


def test_adagrad_and_proximal_adagrad_agree_without_regularisation() -> None:
    a = _first_step(fg.train.AdagradOptimizer(0.1, initial_accumulator_value=0.2))
    b = _first_step(fg.train.ProximalAdagradOptimizer(0.1, initial_accumulator_value=0.2))
    np.testing.assert_allclose(a, W - 0.1 * G / np.sqrt(0.2 + G**2), rtol=1e-6)
    np.testing.assert_allclose(a, b, rtol=1e-6)


def test_adadelta_first_step() -> None:
    got = _first_step(fg.train.AdadeltaOptimizer(1.0, rho=0.95, epsilon=1e-6))
    update = np.sqrt(1e-6) / np.sqrt(0.05 * G**2 + 1e-6) * G
    np.testing.assert_allclose(got, W - update, rtol=1e-5)


@pytest.mark.parametrize(
    ("make", "match"),
    [
        pytest.param(
            lambda: fg.train.MomentumOptimizer(0.1, -0.9),
            "momentum must be finite and >= 0",
            id="momentum_negative",
        ),
        pytest.param(
            lambda: fg.train.AdamOptimizer(beta1=1.0),
            r"beta1 must be finite and in \[0, 1\)",
            id="adam_beta1",
        ),
        pytest.param(
            lambda: fg.train.AdamOptimizer(beta2=float("nan")), "beta2", id="adam_beta2_nan"
        ),
        pytest.param(lambda: fg.train.AdamOptimizer(epsilon=-1.0), "epsilon", id="adam_epsilon"),
        pytest.param(
            lambda: fg.train.RMSPropOptimizer(0.1, decay=1.5), "decay", id="rmsprop_decay"
        ),
        pytest.param(
            lambda: fg.train.AdagradOptimizer(0.1, 0.0),
            "initial_accumulator_value must be finite and > 0",
            id="adagrad_zero_accumulator",
        ),
        pytest.param(lambda: fg.train.AdadeltaOptimizer(rho=-0.1), "rho", id="adadelta_rho"),
        pytest.param(
            lambda: fg.train.FtrlOptimizer(0.1, learning_rate_power=0.5),
            "learning_rate_power must be finite and <= 0",
            id="ftrl_power",
        ),
        pytest.param(
            lambda: fg.train.FtrlOptimizer(0.1, initial_accumulator_value=-1.0),
            "initial_accumulator_value",
            id="ftrl_accumulator",
        ),
        pytest.param(
            lambda: fg.train.FtrlOptimizer(0.1, l1_regularization_strength=-1.0),
            "l1_regularization_strength",
            id="ftrl_l1",
        ),
        pytest.param(
            lambda: fg.train.FtrlOptimizer(0.1, l2_shrinkage_regularization_strength=-1.0),
            "l2_shrinkage",
            id="ftrl_shrinkage",
        ),
        pytest.param(
            lambda: fg.train.ProximalGradientDescentOptimizer(0.1, l2_regularization_strength=-1.0),
            "l2_regularization_strength",
            id="proximal_sgd_l2",
        ),
        pytest.param(
            lambda: fg.train.ProximalAdagradOptimizer(0.1, initial_accumulator_value=0.0),
            "initial_accumulator_value",
            id="proximal_adagrad_accumulator",
        ),
    ],
)
def test_out_of_range_hyperparameters_are_rejected(make, match) -> None:
    with pytest.raises(ValueError, match=r"fg\.train\.\w+\(\.\.\.\): " + match):
        make()


def test_every_bad_hyperparameter_is_reported_at_once() -> None:
    with pytest.raises(
        ValueError,
        match=r"AdamOptimizer\(\.\.\.\): beta1 must be finite and in \[0, 1\), got 1\.5; "
        r"beta2 must be finite and in \[0, 1\), got -1\.0; pass values in range",
    ):
        fg.train.AdamOptimizer(beta1=1.5, beta2=-1.0)


@pytest.mark.parametrize(
    "make",
    [
        pytest.param(lambda: fg.train.MomentumOptimizer(0.1, momentum="0.9"), id="string"),
        pytest.param(lambda: fg.train.RMSPropOptimizer(0.1, decay=None), id="none"),
        pytest.param(lambda: fg.train.AdagradOptimizer(0.1, True), id="bool"),
    ],
)
def test_hyperparameters_that_are_not_numbers_are_a_type_error(make) -> None:
    with pytest.raises(TypeError, match=r"fg\.train\.\w+\(\.\.\.\): \w+ must be a number, got"):
        make()


def test_hyperparameters_are_kept_as_given() -> None:
    opt = fg.train.FtrlOptimizer(0.1, l1_regularization_strength=0.5)
    assert opt.hyperparameters["l1_regularization_strength"] == 0.5
    assert opt.hyperparameters["beta"] == 0.0  # TensorFlow's None means 0
    assert fg.train.AdamOptimizer(beta2=0.99).hyperparameters == {
        "beta1": 0.9,
        "beta2": 0.99,
        "epsilon": 1e-8,
    }
