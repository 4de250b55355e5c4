"""``examples/simclr_lars.py``: SimCLR's LARS written on ``fg.train.TF1Optimizer`` learns,
reduces to TensorFlow's momentum where its options say so, and steps by its formula.

Its parity with SimCLR's own source in TensorFlow is ``tests/parity/test_simclr_lars_parity.py``.
The training bars hold with room on seeds 0-1 (after 60 steps the last losses are at
0.08-0.14 of the first, test accuracy 0.92-0.95) and under every instruction set.
"""

import math

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import funcgrad as fg
from tests import example_scripts

pytest.importorskip("sklearn")

example = example_scripts.load("simclr_lars")


@pytest.mark.parametrize("classic_momentum", [True, False], ids=["classic", "popular"])
def test_short_run_loss_falls_and_accuracy_clears_the_bar(classic_momentum: bool) -> None:
    losses, accuracy, state, _ = example.train(
        steps=60, warmup_steps=6, classic_momentum=classic_momentum
    )
    assert sum(losses[-10:]) / 10 < 0.25 * losses[0]
    assert accuracy > 0.85
    assert int(state.global_step) == 60


def _loss(params: dict) -> jax.Array:
    x = jnp.arange(12.0, dtype=jnp.float32).reshape(4, 3) / 10
    return jnp.mean(jnp.tanh(x @ params["dense"]["kernel"] + params["dense"]["bias"][None, :]) ** 2)


def _params() -> dict:
    kernel = np.random.default_rng(0).normal(size=(3, 2)).astype(np.float32)
    return {"dense": {"kernel": jnp.asarray(kernel), "bias": jnp.zeros(2)}}


def _run(opt: fg.train.Optimizer, steps: int = 4) -> fg.train.TrainState:
    state = opt.init(_params())
    step = jax.jit(lambda s: opt.minimize(_loss, s)[0])
    for _ in range(steps):
        state = step(state)
    return state


@pytest.mark.parametrize("use_nesterov", [False, True], ids=["momentum", "nesterov"])
@pytest.mark.parametrize("classic_momentum", [True, False], ids=["classic", "popular"])
def test_without_decay_and_adaptation_it_is_tensorflows_momentum(
    classic_momentum: bool, use_nesterov: bool
) -> None:
    # Classic momentum keeps lr * accumulation, popular the accumulation: at a constant
    # rate both step as tf.train.MomentumOptimizer does.
    lars = example.LARSOptimizer(
        0.3,
        momentum=0.8,
        use_nesterov=use_nesterov,
        exclude_from_layer_adaptation=["."],
        classic_momentum=classic_momentum,
    )
    momentum = fg.train.MomentumOptimizer(0.3, 0.8, use_nesterov=use_nesterov)
    chex.assert_trees_all_close(_run(lars).params, _run(momentum).params, rtol=1e-6, atol=1e-7)


def test_first_step_scales_the_decayed_gradient_by_the_whole_kernels_trust_ratio() -> None:
    lr, wd, eeta = 0.5, 0.1, 0.01
    opt = example.LARSOptimizer(lr, weight_decay=wd, exclude_from_weight_decay=["bias"], eeta=eeta)
    got = _run(opt, steps=1).params
    params = jax.tree.map(lambda x: np.asarray(x, np.float64), _params())
    grads = jax.tree.map(lambda x: np.asarray(x, np.float64), jax.grad(_loss)(_params()))
    w = params["dense"]["kernel"]
    g = grads["dense"]["kernel"] + wd * w  # decayed, then the Frobenius norms (tf.norm's)
    ratio = eeta * math.sqrt((w**2).sum()) / math.sqrt((g**2).sum())
    np.testing.assert_allclose(got["dense"]["kernel"], w - lr * ratio * g, rtol=1e-6)
    # The bias is zero: its ratio is 1, and it is not decayed.
    np.testing.assert_allclose(got["dense"]["bias"], -lr * grads["dense"]["bias"], rtol=1e-6)


def test_learning_rate_schedule_warms_up_then_decays_by_a_cosine() -> None:
    schedule = example.learning_rate_schedule(0.3, 512, warmup_steps=4, total_steps=12)
    got = [float(schedule(jnp.int32(t))) for t in range(14)]
    peak = 0.3 * 512 / 256
    want = [peak * t / 4 for t in range(4)] + [
        peak * 0.5 * (1 + math.cos(math.pi * min(t - 4, 8) / 8)) for t in range(4, 14)
    ]
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)
    sqrt = example.learning_rate_schedule(0.075, 4096, 4, 12, learning_rate_scaling="sqrt")
    assert float(sqrt(jnp.int32(4))) == pytest.approx(0.075 * 64, rel=1e-6)  # SimCLR's 4.8
    with pytest.raises(ValueError, match="Unknown learning rate scaling cube"):
        example.learning_rate_schedule(0.3, 512, 4, 12, learning_rate_scaling="cube")


def test_tf_names_are_each_variables_momentum() -> None:
    opt = example.LARSOptimizer(0.1)
    state = opt.init(_params())
    assert example.tf_names(state, opt) == ["dense/bias/Momentum", "dense/kernel/Momentum"]
