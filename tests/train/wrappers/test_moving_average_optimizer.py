"""fg.train.MovingAverageOptimizer: the averages' rule, what composes with it, errors.

References: the wrapped optimizer stepped alone with an ``ExponentialMovingAverage``
applied beside it by hand, and the closed form on a scalar.  TensorFlow's own numbers
(the transcribed tf.contrib.opt source) are in
``tests/parity/test_moving_average_optimizer_parity.py``.
"""

import chex
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import funcgrad as fg

IDS = jnp.array([2, 0, 2])


def _params():
    return {"E": jnp.arange(12.0).reshape(4, 3) / 10, "w": jnp.array([0.5, -0.3, 0.2])}


def _loss(params):
    return jnp.sum((params["E"][IDS] @ params["w"] - 1.0) ** 2)


WRAPPED = [
    pytest.param(lambda: fg.train.MomentumOptimizer(0.1, 0.9), id="momentum"),
    pytest.param(lambda: fg.train.LazyAdamOptimizer(0.1), id="lazy_adam"),
    pytest.param(lambda: fg.train.AdamWeightDecayOptimizer(0.1, 0.01), id="bert"),
    pytest.param(lambda: fg.train.Optimizer(optax.sgd(0.1)), id="optax_sgd"),
]


@pytest.mark.parametrize("sequential_update", [True, False])
@pytest.mark.parametrize("make", WRAPPED)
def test_the_wrapped_optimizer_and_an_average_beside_it(make, sequential_update) -> None:
    inner, ema = make(), fg.train.ExponentialMovingAverage(0.9, num_updates=True)
    opt = fg.train.MovingAverageOptimizer(make(), 0.9, True, sequential_update)
    state = opt.init(_params())
    alone, averages = inner.init(_params()), ema.init(_params())
    step = jax.jit(lambda s: opt.minimize(_loss, s)[0], donate_argnums=0)
    for _ in range(3):
        state = step(state)
        before = alone
        alone, _ = inner.minimize(_loss, alone)
        read = alone if sequential_update else before
        averages = ema.apply(averages, read.params, step=read.global_step)
    # One computation, compiled or eager: float32 rounding apart.
    close = {"rtol": 1e-5, "atol": 1e-6}
    chex.assert_trees_all_close(state.params, alone.params, **close)
    chex.assert_trees_all_close(state.opt_state.inner_state, alone.opt_state, **close)
    chex.assert_trees_all_close(state.opt_state.ema_state, averages, **close)


def test_the_decay_reads_the_step_after_the_update_or_before_it() -> None:
    """SGD on ``w``, ``dw = 1``: ``w`` 10 -> 9; the average moves from 10 toward 9
    (after) or stays at 10 (before), at decay min(0.99, 2/11) or min(0.99, 1/10)."""
    for sequential, w, s in [(True, 9.0, 1.0), (False, 10.0, 0.0)]:
        opt = fg.train.MovingAverageOptimizer(
            fg.train.GradientDescentOptimizer(1.0), 0.99, True, sequential
        )
        state, _ = opt.minimize(lambda p: p, opt.init(jnp.float32(10.0)))
        decay = np.float32(min(0.99, (1 + s) / (10 + s)))
        want = 10.0 - (10.0 - w) * (np.float32(1) - decay)
        np.testing.assert_allclose(state.opt_state.ema_state.average, want, rtol=1e-6)


def test_a_fixed_count_gives_a_fixed_decay() -> None:
    opt = fg.train.MovingAverageOptimizer(fg.train.GradientDescentOptimizer(1.0), 0.99, 5)
    assert opt.ema.decay == float(np.float32(6) / np.float32(15)) and not opt.ema.num_updates
    big = fg.train.MovingAverageOptimizer(fg.train.GradientDescentOptimizer(1.0), 0.5, 10**6)
    assert big.ema.decay == 0.5


def test_a_variable_without_a_gradient_keeps_its_average() -> None:
    opt = fg.train.MovingAverageOptimizer(fg.train.GradientDescentOptimizer(1.0), 0.5)
    state, _ = opt.minimize(lambda p: p["a"] + p["b"], opt.init({"a": 4.0, "b": 4.0}))
    assert state.opt_state.ema_state.average == {"a": 3.5, "b": 3.5}  # a, b: 4 -> 3
    gvs = opt.compute_gradients(lambda p: p["a"] + p["b"], state.params)
    state = opt.apply_gradients(gvs[:1], state)  # only a's pair
    assert float(state.params["b"]) == 3.0
    assert state.opt_state.ema_state.average == {"a": 2.75, "b": 3.5}


def test_only_the_trained_variables_are_averaged() -> None:
    opt = fg.train.MovingAverageOptimizer(fg.train.AdamOptimizer(0.1))
    state = opt.init({"w": jnp.ones(2), "count": jnp.int32(3), "act": jax.nn.relu})
    average = state.opt_state.ema_state.average
    assert average["act"] is None and average["count"] is None
    chex.assert_trees_all_equal(average["w"], state.params["w"])
    assert average["w"] is not state.params["w"]  # a new buffer


def test_swapped_twice_is_the_state() -> None:
    opt = fg.train.MovingAverageOptimizer(fg.train.MomentumOptimizer(0.1, 0.9), 0.5)
    state, _ = opt.minimize(_loss, opt.init(_params()))
    swapped = jax.jit(opt.swapped)(state)
    assert swapped.params["w"] is not None
    chex.assert_trees_all_equal(swapped.params, state.opt_state.ema_state.average)
    chex.assert_trees_all_equal(swapped.opt_state.ema_state.average, state.params)
    chex.assert_trees_all_equal(opt.swapped(swapped), state)


def test_under_a_loss_scale_a_skipped_step_leaves_the_averages() -> None:
    opt = fg.train.LossScaleOptimizer(
        fg.train.MovingAverageOptimizer(fg.train.GradientDescentOptimizer(1.0), 0.5)
    )
    state = opt.init(jnp.float32(4.0))
    state, _ = opt.minimize(lambda w, x: w * x, state, jnp.float32(jnp.inf))
    assert float(state.opt_state.inner_state.ema_state.average) == 4.0
    state, _ = opt.minimize(lambda w, x: w * x, state, jnp.float32(2.0))
    assert float(state.opt_state.inner_state.ema_state.average) == 3.0  # w: 4 -> 2


def test_tf_checkpoints_hold_the_averages(tmp_path) -> None:
    opt = fg.train.MovingAverageOptimizer(fg.train.AdamOptimizer(0.1), 0.5)
    state, _ = opt.minimize(_loss, opt.init(_params()))
    prefix = fg.train.save_tf_checkpoint(tmp_path / "model.ckpt-1", state, opt)
    report = fg.testing.compare_tf_checkpoint(prefix, state, opt)
    assert {"E/ExponentialMovingAverage", "w/ExponentialMovingAverage", "w/Adam"} <= set(report)
    template = opt.init(jax.tree.map(jnp.zeros_like, _params()))
    chex.assert_trees_all_equal(fg.train.restore_tf_checkpoint(prefix, template, opt), state)

    only_w = fg.train.save_tf_checkpoint(tmp_path / "w.ckpt-1", state, opt, var_list=["w"])
    kept = fg.train.restore_tf_checkpoint(only_w, template, opt, var_list=["w"])
    assert jnp.all(kept.opt_state.ema_state.average["E"] == 0)  # not in the checkpoint
    chex.assert_trees_all_equal(
        kept.opt_state.ema_state.average["w"], state.opt_state.ema_state.average["w"]
    )


def test_the_orbax_checkpointer_resumes_it(tmp_path) -> None:
    opt = fg.train.MovingAverageOptimizer(fg.train.LazyAdamOptimizer(0.1), 0.5, True)
    state, _ = opt.minimize(_loss, opt.init(_params()))
    with fg.train.Checkpointer(tmp_path) as ckpt:
        ckpt.save(state)
        chex.assert_trees_all_equal(ckpt.restore(opt.init(_params())), state)


@pytest.mark.parametrize(
    ("opt", "error", "match"),
    [
        pytest.param(
            optax.sgd(0.1),
            TypeError,
            r"MovingAverageOptimizer\(fg.train.Optimizer\(tx\)\)",
            id="optax",
        ),
        pytest.param(
            "adam", TypeError, r"e.g. MovingAverageOptimizer\(fg.train.Momentum", id="str"
        ),
        pytest.param(
            fg.train.LossScaleOptimizer(fg.train.AdamOptimizer()),
            TypeError,
            r"LossScaleOptimizer\(MovingAverageOptimizer\(opt\)\)",
            id="loss_scale",
        ),
        pytest.param(
            fg.train.MovingAverageOptimizer(fg.train.AdamOptimizer()),
            TypeError,
            "wrap the optimizer once",
            id="twice",
        ),
        pytest.param(
            fg.train.OptimizerGroup(a=fg.train.AdamOptimizer()),
            TypeError,
            "beside the group with fg.train.ExponentialMovingAverage",
            id="group",
        ),
        pytest.param(
            fg.train.OptimizerGroup(a=fg.train.AdamOptimizer())["a"],
            TypeError,
            "beside the group",
            id="group_member",
        ),
    ],
)
def test_what_it_cannot_wrap(opt, error, match) -> None:
    with pytest.raises(error, match=match):
        fg.train.MovingAverageOptimizer(opt)


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        pytest.param({"average_decay": "0.9"}, TypeError, r"'0.9' is not a number", id="decay_str"),
        pytest.param({"average_decay": 1.0}, ValueError, r"\[0, 1\).*e.g. 0.999", id="decay_1"),
        pytest.param({"average_decay": -0.1}, ValueError, r"\[0, 1\)", id="decay_negative"),
        pytest.param(
            {"average_decay": 1.5, "num_updates": 5}, ValueError, r"\[0, 1\)", id="decay_counted"
        ),
        pytest.param(
            {"average_decay": 0.999999999}, ValueError, "below 1 in float32", id="decay_rounds"
        ),
        pytest.param({"num_updates": 1.5}, TypeError, "num_updates=1.5 is not None, True", id="nu"),
        pytest.param({"num_updates": False}, TypeError, "num_updates=False", id="nu_false"),
        pytest.param(
            {"num_updates": jnp.int32(3)},
            TypeError,
            r"TensorFlow's num_updates=global_step",
            id="nu_array",
        ),
        pytest.param({"num_updates": -1}, ValueError, "pass a count >= 0", id="nu_negative"),
        pytest.param({"sequential_update": 1}, TypeError, "sequential_update=1", id="sequential"),
        pytest.param(
            {"average_decay": None, "sequential_update": "yes"},
            TypeError,
            r"average_decay=None .*; sequential_update='yes'.*average_decay=0.9999",
            id="both",
        ),
    ],
)
def test_bad_arguments(kwargs, error, match) -> None:
    with pytest.raises(error, match=match):
        fg.train.MovingAverageOptimizer(fg.train.AdamOptimizer(), **kwargs)


def test_a_state_of_another_optimizer_and_a_second_average(tmp_path) -> None:
    opt = fg.train.MovingAverageOptimizer(fg.train.AdamOptimizer(0.1))
    plain = fg.train.AdamOptimizer(0.1).init(_params())
    with pytest.raises(ValueError, match=r"make it with state = opt\.init"):
        opt.minimize(_loss, plain)
    with pytest.raises(ValueError, match=r"make it with state = opt\.init"):
        opt.swapped(plain)
    with pytest.raises(TypeError, match=r"not a fg\.train\.TrainState"):
        opt.swapped(_params())
    state = opt.init(_params())
    ema = fg.train.ExponentialMovingAverage(0.9)
    with pytest.raises(ValueError, match="leave ema_state out"):
        fg.train.save_tf_checkpoint(tmp_path / "m", state, opt, ema_state=ema.init(_params()))


def test_under_vmap_each_run_has_its_own_averages() -> None:
    opt = fg.train.MovingAverageOptimizer(fg.train.GradientDescentOptimizer(1.0), 0.5, True)

    def run(w0):
        state, _ = opt.minimize(lambda w: 2 * w, opt.init(w0))
        return state.opt_state.ema_state.average

    starts = jnp.array([3.0, 5.0])  # w: w0 -> w0 - 2; decay min(0.5, 2/11)
    want = starts - 2 * (1 - np.float32(2 / 11))
    np.testing.assert_allclose(jax.vmap(run)(starts), want, rtol=1e-6)


def test_microbatches_average_once_per_step() -> None:
    opt = fg.train.MovingAverageOptimizer(fg.train.AdamOptimizer(0.1), 0.5, True)
    x = jnp.arange(8.0).reshape(4, 2)

    def loss(p, x):
        return jnp.mean(x @ p["w"])

    whole, _ = opt.minimize(loss, opt.init({"w": jnp.ones(2)}), x)
    split, _ = fg.train.minimize_in_microbatches(
        opt, loss, opt.init({"w": jnp.ones(2)}), x, num_microbatches=2
    )
    chex.assert_trees_all_close(split, whole, rtol=1e-6)


def test_a_group_refuses_it_as_a_member() -> None:
    opt = fg.train.MovingAverageOptimizer(fg.train.GradientDescentOptimizer(0.1))
    with pytest.raises(TypeError, match=r"a= is MovingAverageOptimizer, which wraps an optimizer"):
        fg.train.OptimizerGroup(a=opt)
