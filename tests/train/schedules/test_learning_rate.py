"""Learning rates: floats and schedules held in the state, and their checks."""

import chex
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import funcgrad as fg

ALL = [
    fg.train.GradientDescentOptimizer,
    lambda lr: fg.train.MomentumOptimizer(lr, 0.9),
    fg.train.AdamOptimizer,
    fg.train.RMSPropOptimizer,
    fg.train.AdagradOptimizer,
    fg.train.AdadeltaOptimizer,
    fg.train.FtrlOptimizer,
    fg.train.ProximalGradientDescentOptimizer,
    fg.train.ProximalAdagradOptimizer,
]
IDS = [
    "sgd",
    "momentum",
    "adam",
    "rmsprop",
    "adagrad",
    "adadelta",
    "ftrl",
    "prox_sgd",
    "prox_adagrad",
]


@pytest.mark.parametrize("make", ALL, ids=IDS)
@pytest.mark.parametrize(
    ("rate", "error", "match"),
    [
        pytest.param(-0.1, ValueError, "finite and >= 0, got -0.1", id="negative"),
        pytest.param(float("nan"), ValueError, "finite and >= 0, got nan", id="nan"),
        pytest.param(float("inf"), ValueError, "finite and >= 0, got inf", id="inf"),
        pytest.param("0.1x", TypeError, "a number or a schedule", id="not_a_number"),
    ],
)
def test_bad_learning_rate_is_rejected(make, rate, error, match) -> None:
    with pytest.raises(
        error, match=r"fg\.train\.\w+\(learning_rate, \.\.\.\): learning_rate must be " + match
    ):
        make(rate)


def test_schedule_rate_is_the_one_at_global_step_before_the_step() -> None:
    seen = []
    opt = fg.train.GradientDescentOptimizer(lambda step: 1.0 / (step + 1).astype(jnp.float32))
    state = opt.init(jnp.float32(0.0))
    for _ in range(3):
        before = state.params
        state = opt.apply_gradients([(jnp.float32(1.0), None)], state)
        seen.append(float(before - state.params))
    np.testing.assert_allclose(seen, [1.0, 1 / 2, 1 / 3], rtol=1e-6)


def test_schedule_follows_global_step_of_a_restored_state() -> None:
    opt = fg.train.GradientDescentOptimizer(lambda step: step.astype(jnp.float32))
    state = opt.init(jnp.float32(0.0))._replace(global_step=jnp.int32(10))
    state = opt.apply_gradients([(jnp.float32(1.0), None)], state)
    assert float(state.params) == -10.0


def test_set_learning_rate_changes_the_rate_without_retracing() -> None:
    opt = fg.train.AdamOptimizer(0.1)
    chex.clear_trace_counter()
    step = jax.jit(chex.assert_max_traces(n=1)(lambda s: opt.minimize(lambda w: 3.0 * w, s)[0]))
    state = step(opt.init(jnp.float32(1.0)))
    state = step(fg.train.set_learning_rate(state, 0.0))
    assert float(state.params) == pytest.approx(0.9, rel=1e-6)  # the zero rate froze it
    state = step(fg.train.set_learning_rate(state, 0.5))
    assert float(state.params) < 0.9


@pytest.mark.parametrize(
    ("rate", "match"),
    [
        pytest.param(-1.0, "finite and >= 0", id="negative"),
        pytest.param(float("nan"), "finite", id="nan"),
    ],
)
def test_set_learning_rate_rejects_bad_rates(rate, match) -> None:
    state = fg.train.GradientDescentOptimizer(0.1).init(jnp.float32(1.0))
    with pytest.raises(ValueError, match=r"set_learning_rate.*" + match):
        fg.train.set_learning_rate(state, rate)


def test_set_learning_rate_needs_an_injected_rate() -> None:
    state = fg.train.Optimizer(optax.sgd(0.1)).init(jnp.float32(1.0))
    with pytest.raises(ValueError, match="holds no float learning rate"):
        fg.train.set_learning_rate(state, 0.2)


def test_scale_by_learning_rate_keeps_each_leaf_dtype() -> None:
    tx = fg.train.scale_by_learning_rate(jnp.float32(0.5), flip_sign=False)
    g = {"h": jnp.ones(2, jnp.bfloat16), "f": jnp.ones(2, jnp.float32)}
    updates, _ = tx.update(g, tx.init(g))
    assert updates["h"].dtype == jnp.bfloat16
    np.testing.assert_array_equal(updates["f"], [0.5, 0.5])


def test_set_learning_rate_refuses_a_scheduled_rate() -> None:
    opt = fg.train.GradientDescentOptimizer(lambda step: jnp.float32(0.1))
    with pytest.raises(ValueError, match="holds no float learning rate"):
        fg.train.set_learning_rate(opt.init(jnp.float32(1.0)), 0.2)


def test_tx_alone_in_optax_counts_its_own_steps_for_a_schedule() -> None:
    tx = fg.train.GradientDescentOptimizer(lambda step: 1.0 / (step + 1).astype(jnp.float32)).tx
    w = jnp.float32(0.0)
    state = tx.init(w)
    steps = []
    for _ in range(2):
        updates, state = tx.update(jnp.float32(1.0), state, w)
        steps.append(float(updates))
    assert isinstance(state, fg.train.InjectLearningRateState)
    np.testing.assert_allclose(steps, [-1.0, -0.5])


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.bfloat16], ids=["float32", "bfloat16"])
def test_set_learning_rate_on_an_inject_hyperparams_state(dtype) -> None:
    opt = fg.train.Optimizer(optax.inject_hyperparams(optax.sgd)(learning_rate=0.1))
    chex.clear_trace_counter()
    step = jax.jit(chex.assert_max_traces(lambda s: opt.minimize(lambda w: 2.0 * w, s)[0], n=1))
    state = step(opt.init(jnp.array(1.0, dtype)))
    state = fg.train.set_learning_rate(state, 0.25)
    assert state.opt_state.hyperparams["learning_rate"].dtype == dtype
    before = float(state.params)
    state = step(state)
    assert before - float(state.params) == pytest.approx(0.5, rel=1e-2)  # 0.25 * 2


def test_set_learning_rate_refuses_a_scheduled_inject_hyperparams_rate() -> None:
    tx = optax.inject_hyperparams(optax.sgd)(learning_rate=optax.linear_schedule(0.1, 0.0, 10))
    state = fg.train.Optimizer(tx).init(jnp.float32(1.0))
    with pytest.raises(ValueError, match=r"holds no float learning rate \(a schedule"):
        fg.train.set_learning_rate(state, 0.2)


def test_set_learning_rate_needs_a_train_state() -> None:
    opt_state = fg.train.GradientDescentOptimizer(0.1).init(jnp.float32(1.0)).opt_state
    with pytest.raises(TypeError, match=r"set_learning_rate.*state is a InjectLearningRateState"):
        fg.train.set_learning_rate(opt_state, 0.2)
