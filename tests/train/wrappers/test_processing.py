"""fg.train.optimize_loss: the optimizer each form builds, the processing and its order,
what composes with it, and the errors.

References: the built optimizer stepped alone on gradients processed by hand (noise drawn
independently with the documented keys, multiplied, clipped by the closed form of the
global norm).  TensorFlow's own numbers are in ``tests/parity/test_optimize_loss_parity.py``.
"""

import chex
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import funcgrad as fg

PARAMS = {"dense": {"kernel": jnp.array([[1.0, -2.0], [0.5, 0.25]]), "bias": jnp.array([0.1, 0.2])}}
X = jnp.array([[1.0, 2.0], [3.0, -1.0], [0.5, 0.5]])


def loss_fn(params, x):
    d = params["dense"]
    return jnp.sum((x @ d["kernel"] + d["bias"][None, :]) ** 2)


def _grads(params=PARAMS):
    """The raw gradients, by name, from plain jax.grad."""
    g = jax.grad(loss_fn)(params, X)["dense"]
    return {"dense/bias": g["bias"], "dense/kernel": g["kernel"]}


def _apply_by_hand(opt, grads, state):
    """``opt`` (the built optimizer) applied to the gradients given by name."""
    pairs = [(grads[n], None) for n in fg.train.variable_names(state.params)]
    return opt.apply_gradients(pairs, state)


def _assert_states_close(a, b):
    chex.assert_trees_all_close(a, b, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize(
    ("name", "kind", "hyperparameters"),
    [
        ("Adagrad", fg.train.AdagradOptimizer, {"initial_accumulator_value": 0.1}),
        ("Adam", fg.train.AdamOptimizer, {"beta1": 0.9, "beta2": 0.999, "epsilon": 1e-8}),
        ("Ftrl", fg.train.FtrlOptimizer, {"learning_rate_power": -0.5}),
        ("Momentum", fg.train.MomentumOptimizer, {"momentum": 0.9, "use_nesterov": False}),
        ("RMSProp", fg.train.RMSPropOptimizer, {"decay": 0.9, "momentum": 0.0}),
        ("SGD", fg.train.GradientDescentOptimizer, {}),
    ],
)
def test_each_name_builds_tensorflows_optimizer_with_its_defaults(name, kind, hyperparameters):
    opt = fg.train.optimize_loss(0.1, name)
    assert type(opt.optimizer) is kind
    for k, v in hyperparameters.items():
        assert opt.optimizer.hyperparameters[k] == v
    state, loss = opt.minimize(loss_fn, opt.init(PARAMS), X)
    alone = kind(0.1, **({"momentum": 0.9} if name == "Momentum" else {}))
    want, want_loss = alone.minimize(loss_fn, alone.init(PARAMS), X)
    _assert_states_close(state, want)
    assert float(loss) == float(want_loss)


def test_class_instance_and_functions_build_the_same_optimizer():
    forms = [
        fg.train.optimize_loss(None, fg.train.MomentumOptimizer(0.1, momentum=0.5)),
        fg.train.optimize_loss(0.1, lambda lr: fg.train.MomentumOptimizer(lr, momentum=0.5)),
        fg.train.optimize_loss(None, lambda: fg.train.MomentumOptimizer(0.1, momentum=0.5)),
    ]
    alone = fg.train.MomentumOptimizer(0.1, momentum=0.5)
    want = alone.init(PARAMS)
    for _ in range(3):
        want, _ = alone.minimize(loss_fn, want, X)
    for opt in forms:
        state = opt.init(PARAMS)
        for _ in range(3):
            state, _ = opt.minimize(loss_fn, state, X)
        _assert_states_close(state, want)
    state, _ = fg.train.optimize_loss(0.1, fg.train.AdamOptimizer).minimize(
        loss_fn, fg.train.AdamOptimizer(0.1).init(PARAMS), X
    )
    want, _ = fg.train.AdamOptimizer(0.1).minimize(
        loss_fn, fg.train.AdamOptimizer(0.1).init(PARAMS), X
    )
    _assert_states_close(state, want)


def test_a_class_that_needs_more_than_the_rate_gets_pythons_error():
    with pytest.raises(TypeError, match="momentum"):
        fg.train.optimize_loss(0.1, fg.train.MomentumOptimizer)


def test_noise_then_multipliers_then_clipping_in_tensorflows_order():
    key = jax.random.key(3)
    opt = fg.train.optimize_loss(
        0.1,
        "Adam",
        gradient_noise_scale=0.5,
        key=key,
        gradient_multipliers={"dense/kernel": 3.0},
        clip_gradients=2.0,
    )
    state = opt.init(PARAMS)
    adam = fg.train.AdamOptimizer(0.1)
    want = adam.init(PARAMS)
    names = fg.train.variable_names(PARAMS)
    for step in range(3):
        raw = _grads(state.params)
        step_key = jax.random.fold_in(key, step)
        noisy = {
            n: raw[n]
            + 0.5
            * jax.random.truncated_normal(jax.random.fold_in(step_key, i), -2.0, 2.0, raw[n].shape)
            for i, n in enumerate(names)
        }
        multiplied = {**noisy, "dense/kernel": noisy["dense/kernel"] * 3.0}
        norm = jnp.sqrt(sum(jnp.sum(g**2) for g in multiplied.values()))
        assert float(norm) > 2.0  # the clipping acts
        clipped = {n: g * (2.0 / norm) for n, g in multiplied.items()}
        want = _apply_by_hand(adam, clipped, want)
        state, _ = opt.minimize(loss_fn, state, X)
        _assert_states_close(state, want)


def test_the_noise_is_truncated_normal_scaled_and_fresh_each_step():
    big = {"w": jnp.zeros(20000)}
    captured = []
    record = lambda gvs: captured.append(gvs[0][0]) or gvs  # noqa: E731
    opt = fg.train.optimize_loss(  # the callable sees the noisy gradient of sum(w): 1 + noise
        0.0, "SGD", gradient_noise_scale=2.0, key=jax.random.key(0), clip_gradients=record
    )
    state = opt.init(big)
    for _ in range(2):
        state, _ = opt.minimize(lambda p: jnp.sum(p["w"]), state)
    noises = [np.asarray(c) - 1.0 for c in captured]
    for noise in noises:
        assert np.abs(noise).max() <= 4.0  # two standard deviations, times the scale
        assert abs(noise.mean()) < 0.05
        assert abs(noise.std() - 2.0 * 0.8796) < 0.03  # the truncated normal's deviation
    assert not np.allclose(noises[0], noises[1])


def test_noise_makes_a_sparse_gradient_dense_as_in_tensorflow():
    table = {"E": jnp.ones((4, 2))}
    lookup = lambda p: jnp.sum(p["E"][jnp.array([1, 1])])  # noqa: E731
    opt = fg.train.optimize_loss(0.1, "SGD", gradient_noise_scale=0.1, key=jax.random.key(1))
    state, _ = opt.minimize(lookup, opt.init(table))
    assert not np.any(np.asarray(state.params["E"])[[0, 2, 3]] == 1.0)  # rows never read move
    opt = fg.train.optimize_loss(0.1, "Momentum", gradient_multipliers={"E": 0.5})
    state, _ = opt.minimize(lookup, opt.init(table))
    moved = np.asarray(state.params["E"])
    np.testing.assert_allclose(moved[1], 1.0 - 0.1 * 0.5 * 2.0, rtol=1e-6)
    assert np.all(moved[[0, 2, 3]] == 1.0)  # the multiplied gradient stays sparse


def test_clip_callable_takes_and_returns_pairs():
    seen = []

    def drop_bias(gvs):
        seen.append([(g is None, v.shape) for g, v in gvs])
        return [(g, v) for g, v in gvs if v.ndim == 2]

    opt = fg.train.optimize_loss(0.1, "SGD", clip_gradients=drop_bias)
    state, _ = opt.minimize(loss_fn, opt.init(PARAMS), X)
    assert seen == [[(False, (2,)), (False, (2, 2))]]
    np.testing.assert_array_equal(state.params["dense"]["bias"], PARAMS["dense"]["bias"])
    kernel = PARAMS["dense"]["kernel"] - 0.1 * _grads()["dense/kernel"]
    np.testing.assert_allclose(state.params["dense"]["kernel"], kernel, rtol=1e-6)


def test_increment_global_step_false_keeps_the_step_and_the_schedule():
    decay = lambda lr, step: lr * 0.5 ** step.astype(jnp.float32)  # noqa: E731
    kept = fg.train.optimize_loss(
        0.1, "SGD", learning_rate_decay_fn=decay, increment_global_step=False
    )
    counted = fg.train.optimize_loss(0.1, "SGD", learning_rate_decay_fn=decay)
    a, b = kept.init({"w": jnp.float32(0.0)}), counted.init({"w": jnp.float32(0.0)})
    for _ in range(3):
        a, _ = kept.minimize(lambda p: p["w"], a)
        b, _ = counted.minimize(lambda p: p["w"], b)
    assert int(a.global_step) == 0 and int(b.global_step) == 3
    assert float(a.params["w"]) == pytest.approx(-0.3)
    assert float(b.params["w"]) == pytest.approx(-(0.1 + 0.05 + 0.025))


def test_variables_choose_what_is_trained_and_a_call_selects_among_them():
    opt = fg.train.optimize_loss(0.1, "SGD", variables=["dense/kernel"])
    state, _ = opt.minimize(loss_fn, opt.init(PARAMS), X)
    np.testing.assert_array_equal(state.params["dense"]["bias"], PARAMS["dense"]["bias"])
    assert not np.allclose(state.params["dense"]["kernel"], PARAMS["dense"]["kernel"])
    state, _ = opt.minimize(loss_fn, state, X, var_list=["dense/kernel"])
    with pytest.raises(ValueError, match=r"selects \['dense/bias'\], which optimize_loss's"):
        opt.minimize(loss_fn, state, X, var_list=["dense/bias"])
    with pytest.raises(ValueError, match="var_list names 'kernel'"):
        fg.train.optimize_loss(0.1, "SGD", variables=["kernel"]).init(PARAMS)


def test_a_jitted_donated_step_compiles_once_and_matches_the_eager_one():
    opt = fg.train.optimize_loss(
        fg.train.exponential_decay(0.1, 2, 0.5),
        "RMSProp",
        gradient_noise_scale=0.01,
        key=jax.random.key(5),
        gradient_multipliers={"dense/bias": 2.0},
        clip_gradients=1.0,
    )
    traces = []

    def step(state, x):
        traces.append(1)
        return opt.minimize(loss_fn, state, x)

    jitted = jax.jit(step, donate_argnums=0)
    state, eager = opt.init(jax.tree.map(jnp.copy, PARAMS)), opt.init(PARAMS)
    for _ in range(3):
        state, _ = jitted(state, X)
        eager, _ = step(eager, X)
    assert len(traces) == 4  # one trace, three eager calls
    _assert_states_close(state, eager)
    again = opt.init(jax.tree.map(jnp.copy, PARAMS))  # the same object, after donated steps
    for _ in range(3):
        again, _ = jitted(again, X)
    _assert_states_close(again, eager)


def test_wraps_a_loss_scale_optimizer_and_its_state_takes_set_learning_rate(tmp_path):
    scaled = fg.train.LossScaleOptimizer(fg.train.AdamOptimizer(0.1), initial_scale=8.0)
    opt = fg.train.optimize_loss(None, scaled, clip_gradients=1.0)
    state = opt.init(PARAMS)
    state, _ = opt.minimize(lambda p, x: loss_fn(p, x) * jnp.inf, state, X)
    assert int(state.global_step) == 0 and float(scaled.loss_scale(state)) == 4.0
    plain = fg.train.optimize_loss(0.1, "Adam")
    state = fg.train.set_learning_rate(plain.init(PARAMS), 0.01)
    assert float(state.opt_state.learning_rate) == pytest.approx(0.01)
    with fg.train.Checkpointer(tmp_path) as ckpt:
        state, _ = plain.minimize(loss_fn, state, X)
        ckpt.save(state)
        chex.assert_trees_all_equal(ckpt.restore(plain.init(PARAMS)), state)


def test_apply_gradients_processes_the_pairs_and_compute_gradients_does_not():
    opt = fg.train.optimize_loss(0.1, "SGD", gradient_multipliers={"dense/bias": 0.0})
    gvs = opt.compute_gradients(loss_fn, PARAMS, X)
    np.testing.assert_allclose(gvs[0][0], _grads()["dense/bias"], rtol=1e-6)
    state = opt.apply_gradients(gvs, opt.init(PARAMS))
    np.testing.assert_array_equal(state.params["dense"]["bias"], PARAMS["dense"]["bias"])


# --- bad input ------------------------------------------------------------------------

BAD = [
    pytest.param(
        {"optimizer": "adam"},
        ValueError,
        r"'adam' is not one of TensorFlow's names \['Adagrad', 'Adam', 'Ftrl', 'Momentum', "
        r"'RMSProp', 'SGD'\] \(did you mean 'Adam'\?\)",
        id="unknown_name",
    ),
    pytest.param(
        {"learning_rate": "0.1"},
        TypeError,
        "learning_rate must be a number or a schedule",
        id="rate_type",
    ),
    pytest.param({"learning_rate": -0.1}, ValueError, "finite and >= 0", id="rate_negative"),
    pytest.param(
        {"learning_rate": None},
        ValueError,
        "needs one; pass a learning_rate such as 0.01",
        id="name_without_rate",
    ),
    pytest.param(
        {"learning_rate": None, "optimizer": fg.train.AdamOptimizer},
        ValueError,
        "given a class",
        id="class_without_rate",
    ),
    pytest.param(
        {"optimizer": fg.train.AdamOptimizer(0.1)},
        ValueError,
        "pass learning_rate=None, or pass the class",
        id="rate_with_instance",
    ),
    pytest.param(
        {
            "learning_rate": None,
            "optimizer": fg.train.AdamOptimizer(0.1),
            "learning_rate_decay_fn": lambda lr, s: lr,
        },
        ValueError,
        "would be ignored",
        id="decay_without_rate",
    ),
    pytest.param(
        {"learning_rate_decay_fn": 0.96}, TypeError, "must be a function", id="decay_not_callable"
    ),
    pytest.param(
        {"learning_rate_decay_fn": lambda lr, s: jnp.ones(2)},
        TypeError,
        "not one floating scalar",
        id="decay_not_scalar",
    ),
    pytest.param(
        {"optimizer": optax.sgd(0.1)}, TypeError, r"fg.train.Optimizer\(tx\)", id="optax_tx"
    ),
    pytest.param(
        {"optimizer": lambda lr: optax.sgd(lr)},
        TypeError,
        "returned a GradientTransformation",
        id="function_returns_optax",
    ),
    pytest.param(
        {"optimizer": fg.train.LossScaleOptimizer},
        TypeError,
        "takes no learning_rate",
        id="class_without_learning_rate",
    ),
    pytest.param(
        {"optimizer": 3}, TypeError, "optimizer is a int; pass a name", id="not_an_optimizer"
    ),
    pytest.param(
        {"gradient_noise_scale": 0.1},
        TypeError,
        r"pass key=jax.random.key\(0\)",
        id="noise_without_key",
    ),
    pytest.param(
        {"key": jax.random.key(0)},
        ValueError,
        "without gradient_noise_scale",
        id="key_without_noise",
    ),
    pytest.param(
        {"gradient_noise_scale": -1.0, "key": jax.random.key(0)},
        ValueError,
        "finite and >= 0",
        id="noise_negative",
    ),
    pytest.param(
        {"gradient_noise_scale": 0.1, "key": 0},
        TypeError,
        "key must be a PRNG key, got 0; pass key=jax.random.key",
        id="key_not_a_key",
    ),
    pytest.param(
        {"clip_gradients": "5"}, TypeError, "clip_gradients must be a number", id="clip_type"
    ),
    pytest.param(
        {"clip_gradients": 0.0}, ValueError, "clip_gradients must be finite and > 0", id="clip_zero"
    ),
    pytest.param(
        {"gradient_multipliers": {"dense/kernel": "a"}},
        TypeError,
        "must map variable names to numbers",
        id="multiplier_type",
    ),
    pytest.param({"update_ops": [lambda: None]}, ValueError, "has_aux=True", id="update_ops"),
    pytest.param(
        {"summaries": ["norms"]},
        ValueError,
        r"summaries \['norms'\] are not among",
        id="summary_name",
    ),
    pytest.param(
        {"increment_global_step": 1},
        TypeError,
        "increment_global_step=1 is not a bool",
        id="increment_type",
    ),
]


@pytest.mark.parametrize(("change", "error", "match"), BAD)
def test_bad_arguments_say_the_fix(change, error, match):
    arguments = {"learning_rate": 0.1, "optimizer": "Adam", **change}
    with pytest.raises(error, match=match):
        fg.train.optimize_loss(**arguments)


def test_a_multiplier_name_that_is_no_variable_is_an_error_at_init_and_step():
    opt = fg.train.optimize_loss(0.1, "SGD", gradient_multipliers={"dense/kernel:0": 0.1})
    fix = (
        r"'dense/kernel:0' \(did you mean 'dense/kernel'\?\), which are not variables "
        r"\(TensorFlow would skip them silently\).*key the multipliers by these names"
    )
    with pytest.raises(ValueError, match=fix):
        opt.init(PARAMS)
    state = fg.train.GradientDescentOptimizer(0.1).init(PARAMS)
    with pytest.raises(ValueError, match=fix):
        opt.minimize(loss_fn, state, X)


def test_accepted_graph_arguments_change_nothing():
    plain = fg.train.optimize_loss(0.1, "Adam")
    graph = fg.train.optimize_loss(
        0.1,
        "Adam",
        update_ops=[],
        name="train",
        summaries=["loss", "gradients"],
        colocate_gradients_with_ops=True,
    )
    assert graph.name == "train" and plain.name == "OptimizeLoss"
    a, _ = plain.minimize(loss_fn, plain.init(PARAMS), X)
    b, _ = graph.minimize(loss_fn, graph.init(PARAMS), X)
    chex.assert_trees_all_equal(a, b)


def test_over_a_group_member_and_inside_a_loss_scale_optimizer():
    both = {"W": jnp.ones(2), "b": jnp.ones(2)}
    squares = lambda p: jnp.sum(p["W"] ** 2) + jnp.sum(p["b"] ** 2)  # noqa: E731
    group = fg.train.OptimizerGroup(
        D=(fg.train.GradientDescentOptimizer(0.1), ["W"]),
        G=(fg.train.GradientDescentOptimizer(0.1), ["b"]),
    )
    d = fg.train.optimize_loss(None, group["D"], gradient_multipliers={"W": 0.5})
    state, _ = d.minimize(squares, group.init(both))
    np.testing.assert_allclose(state.params["W"], 0.9, rtol=1e-6)
    np.testing.assert_array_equal(state.params["b"], both["b"])
    scaled = fg.train.LossScaleOptimizer(
        fg.train.optimize_loss(0.1, "SGD", variables=["W"], gradient_multipliers={"W": 0.5}),
        initial_scale=4.0,
    )
    state, _ = scaled.minimize(squares, scaled.init(both))
    np.testing.assert_allclose(state.params["W"], 0.9, rtol=1e-6)
    np.testing.assert_array_equal(state.params["b"], both["b"])
    with pytest.raises(
        TypeError,
        match=r"a= is _OptimizeLoss, which wraps an optimizer: put the optimizer it wraps",
    ):
        fg.train.OptimizerGroup(a=fg.train.optimize_loss(0.1, "SGD"))


def test_tf_checkpoint_names_follow_the_scope_and_the_variables(tmp_path):
    opt = fg.train.optimize_loss(
        0.1, "Momentum", variables=["dense/kernel"], name="train", learning_rate_decay_fn=None
    )
    state, _ = opt.minimize(loss_fn, opt.init(PARAMS), X)
    prefix = fg.train.save_tf_checkpoint(str(tmp_path / "model.ckpt"), state, opt)
    assert sorted(fg.testing.compare_tf_checkpoint(prefix, state, opt)) == [
        "dense/bias",
        "dense/kernel",
        "global_step",
        "train/dense/kernel/Momentum",
        "train/learning_rate",
    ]
    decayed = fg.train.optimize_loss(0.1, "SGD", learning_rate_decay_fn=lambda lr, s: lr * 0.5)
    state, _ = decayed.minimize(loss_fn, decayed.init(PARAMS), X)
    prefix = fg.train.save_tf_checkpoint(str(tmp_path / "decayed.ckpt"), state, decayed)
    restored = fg.train.restore_tf_checkpoint(prefix, decayed.init(PARAMS), decayed)
    chex.assert_trees_all_equal(restored, state)  # the base rate is written, none is held


def test_a_restored_rate_the_decay_function_does_not_decay_is_refused(tmp_path) -> None:
    """TensorFlow's learning_rate_decay_fn reads the restored OptimizeLoss/learning_rate;
    this one decays the number it was built with, so a different one in the file is an
    error that says which rate to build with (the same one continues TensorFlow's run)."""
    decay = lambda lr, step: lr * 0.5 ** step.astype(jnp.float32)  # noqa: E731
    params = {"w": jnp.float32(1.0)}
    saved = fg.train.optimize_loss(0.5, "SGD", learning_rate_decay_fn=decay)
    state, _ = saved.minimize(lambda p: p["w"] ** 2, saved.init(params))
    prefix = fg.train.save_tf_checkpoint(str(tmp_path / "m"), state, saved)
    other = fg.train.optimize_loss(0.1, "SGD", learning_rate_decay_fn=decay)
    match = r"'OptimizeLoss/learning_rate' is 0\.5 in .*learning_rate=0\.1.*learning_rate=0\.5"
    with pytest.raises(ValueError, match=match):
        fg.train.restore_tf_checkpoint(prefix, other.init(params), other)
    same = fg.train.optimize_loss(0.5, "SGD", learning_rate_decay_fn=decay)
    restored = fg.train.restore_tf_checkpoint(prefix, same.init(params), same)
    chex.assert_trees_all_equal(restored, state)


def test_the_decay_function_is_called_once_a_step() -> None:
    calls = []

    def decay(lr, step):
        calls.append(step)
        return lr * 0.5 ** step.astype(jnp.float32)

    opt = fg.train.optimize_loss(0.1, "Adam", learning_rate_decay_fn=decay)
    ids = jnp.array([0, 2])
    state = opt.init({"E": jnp.ones((3, 2)), "w": jnp.ones(2)})
    before = len(calls)
    for _ in range(3):  # a sparse and a dense gradient
        state, _ = opt.minimize(lambda p: jnp.sum(p["E"][ids] @ p["w"]), state)
    assert len(calls) - before == 3


def test_a_slot_the_checkpoint_lacks_points_to_variables(tmp_path) -> None:
    """TensorFlow makes no slot for a trainable=False variable, nor for one the loss never
    reads: the error says how to restore such a checkpoint (variables= / var_list=)."""
    params = {"w": jnp.float32(1.0), "update_counter": jnp.float32(0.0)}
    tf_like = fg.train.optimize_loss(0.1, "Adagrad", variables=["w"])
    state, _ = tf_like.minimize(lambda p: p["w"] ** 2, tf_like.init(params))
    prefix = fg.train.save_tf_checkpoint(str(tmp_path / "m"), state, tf_like)
    every = fg.train.optimize_loss(0.1, "Adagrad")
    with pytest.raises(ValueError, match=r"lacks 'OptimizeLoss/update_counter/Adagrad'.*"
                       r"trainable=False variable.*variables= is its var_list"):  # fmt: skip
        fg.train.restore_tf_checkpoint(prefix, every.init(params), every)
