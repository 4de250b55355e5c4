"""fg.train.LossScaleOptimizer: the scale rule, skipped steps, what passes through, errors.

References: the wrapped optimizer stepped alone on the same finite gradients (with a
power-of-two scale, scaling and unscaling change no bit of a normal float32 gradient),
plain optax, and TensorFlow's rule written out by hand.  TensorFlow's own numbers are
in ``tests/parity/test_loss_scale_parity.py``.
"""

import chex
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import funcgrad as fg
from tests.train_steps import JIT
from tests.train_steps import compiled

PARAMS = {"w": jnp.array([1.0, -2.0]), "b": jnp.float32(0.5)}
# optax.adam raises powers of Python floats to int32 counts, which the strict harness
# refuses; its reference runs (and ours with it) use standard promotion.
standard_promotion = jax.numpy_dtype_promotion("standard")


def loss_fn(params, x):
    return jnp.sum((params["w"] * x - 1.0) ** 2) + params["b"] ** 2


def _x(step, bad_steps=()):
    """The input of a step; at ``bad_steps`` it holds an inf, so w's gradient is not finite."""
    return jnp.array([jnp.inf if step in bad_steps else 1.0 + 0.1 * step, 2.0])


def _scaled(inner, **options):
    return fg.train.LossScaleOptimizer(inner, initial_scale=2.0**10, **options)


INNER = [
    pytest.param(lambda: fg.train.GradientDescentOptimizer(0.1), id="sgd"),
    pytest.param(lambda: fg.train.MomentumOptimizer(0.1, 0.9), id="momentum"),
    pytest.param(lambda: fg.train.AdamOptimizer(0.1), id="adam"),
    pytest.param(lambda: fg.train.RMSPropOptimizer(0.1, momentum=0.5, centered=True), id="rmsprop"),
    pytest.param(lambda: fg.train.AdagradOptimizer(0.1), id="adagrad"),
    pytest.param(lambda: fg.train.AdadeltaOptimizer(1.0), id="adadelta"),
    pytest.param(lambda: fg.train.FtrlOptimizer(0.1, l1_regularization_strength=0.01), id="ftrl"),
    pytest.param(lambda: fg.train.ProximalGradientDescentOptimizer(0.1, 0.01), id="proximal_sgd"),
    pytest.param(lambda: fg.train.ProximalAdagradOptimizer(0.1), id="proximal_adagrad"),
    pytest.param(lambda: fg.train.Optimizer(optax.sgd(0.1, momentum=0.5)), id="optax_sgd"),
    pytest.param(
        lambda: fg.train.AdamOptimizer(fg.train.exponential_decay(0.1, 2, 0.5)), id="schedule"
    ),
]


@pytest.mark.parametrize(
    ("jit", "make"),
    [pytest.param(True, *p.values, id=f"{p.id}-with_jit") for p in INNER]
    + [pytest.param(False, *p.values, id=f"{p.id}-without_jit") for p in INNER[2:4]],
)
def test_skipped_steps_leave_no_trace_and_finite_steps_are_the_inner_optimizers(jit, make):
    """Steps 1 and 2 (0-based) are not finite: the run equals the inner optimizer's run
    on the finite steps alone; the state is unchanged by each skipped step.  Jitted over
    every optimizer (traced once), eager over two."""
    inner = make()
    opt = _scaled(inner)
    step = compiled(lambda s, x: opt.minimize(loss_fn, s, x), jit)
    inner_step = jax.jit(lambda s, x: inner.minimize(loss_fn, s, x))
    state, reference = opt.init(PARAMS), inner.init(PARAMS)
    for i in range(6):
        new, loss = step(state, _x(i, bad_steps=(1, 2)))
        if i in (1, 2):
            chex.assert_trees_all_equal(new.params, state.params)
            chex.assert_trees_all_equal(new.opt_state.inner_state, state.opt_state.inner_state)
            assert int(new.global_step) == int(state.global_step)
        else:
            reference, expected_loss = inner_step(reference, _x(i))
            chex.assert_trees_all_close(new.params, reference.params, rtol=1e-6)
            chex.assert_trees_all_close(new.opt_state.inner_state, reference.opt_state, rtol=1e-6)
            np.testing.assert_allclose(loss, expected_loss, rtol=1e-6)
            assert int(new.global_step) == int(reference.global_step)
        state = new
    assert int(state.global_step) == 4


def test_the_scale_follows_tensorflows_dynamic_rule():
    """growth_steps=3: finite steps count 1, 2, then the scale doubles and the count
    restarts; a skipped step halves the scale (not below 1) and restarts the count."""
    opt = fg.train.LossScaleOptimizer(
        fg.train.GradientDescentOptimizer(0.01), initial_scale=2.0, growth_steps=3
    )
    step = jax.jit(lambda s, x: opt.minimize(loss_fn, s, x)[0])
    state = opt.init(PARAMS)
    bad = (4, 6, 7, 8)
    seen = []
    for i in range(11):
        state = step(state, _x(i, bad))
        seen.append((float(opt.loss_scale(state)), int(state.opt_state.good_steps)))
    assert seen == [
        (2.0, 1),
        (2.0, 2),
        (4.0, 0),  # grown after 3 finite steps
        (4.0, 1),
        (2.0, 0),  # skipped: halved
        (2.0, 1),
        (1.0, 0),
        (1.0, 0),  # not below 1
        (1.0, 0),
        (1.0, 1),
        (1.0, 2),
    ]
    assert int(state.global_step) == 11 - len(bad)


def test_the_scale_does_not_grow_past_float32():
    opt = fg.train.LossScaleOptimizer(
        fg.train.GradientDescentOptimizer(0.0), initial_scale=2.0**127, growth_steps=1
    )
    state = opt.apply_gradients([(jnp.float32(1.0), None)], opt.init(jnp.float32(1.0)))
    assert float(opt.loss_scale(state)) == 2.0**127
    assert int(state.opt_state.good_steps) == 0


def test_a_fixed_scale_never_changes_and_applies_non_finite_steps():
    opt = fg.train.LossScaleOptimizer(
        fg.train.GradientDescentOptimizer(0.5), dynamic=False, initial_scale=4.0
    )
    state = opt.init(PARAMS)
    state, _ = opt.minimize(loss_fn, state, _x(0))
    state, _ = opt.minimize(loss_fn, state, _x(1, bad_steps=(1,)))
    assert float(opt.loss_scale(state)) == 4.0
    assert int(state.opt_state.good_steps) == 0
    assert int(state.global_step) == 2
    assert not np.isfinite(state.params["w"]).all()


def test_the_gradients_are_scaled_then_unscaled():
    """The loss's cotangent is multiplied by the scale: a float16 cotangent of 2**-27
    (zero in float16) survives a scale of 2**10 or 2**15 and comes back unscaled in the
    float32 gradient."""
    params = {"w": jnp.float32(1.0)}

    def tiny(p):  # three divisions, each of whose cotangents float16 holds exactly
        return p["w"].astype(jnp.float16) / 256 / 256 / 2048

    assert float(fg.gradients(tiny, params)["w"]) == 0.0  # underflows unscaled
    for scale in [2.0**10, 2.0**15]:
        opt = fg.train.LossScaleOptimizer(
            fg.train.GradientDescentOptimizer(1.0), initial_scale=scale
        )
        [(g, _)] = opt.compute_gradients(tiny, opt.init(params))
        assert g.dtype == jnp.float32
        assert float(g) == 2.0**-27


def test_a_scale_too_large_for_a_float16_loss_is_lowered_first():
    """2**16 is inf in float16: the first step is skipped and the scale halved to 2**15,
    which float16 holds; the next step is applied."""
    opt = fg.train.LossScaleOptimizer(fg.train.GradientDescentOptimizer(0.1), initial_scale=2.0**16)
    half_loss = lambda w: jnp.sum(w.astype(jnp.float16)) / 4  # noqa: E731
    state = opt.init(jnp.array([1.0, 2.0]))
    state, loss = opt.minimize(half_loss, state)
    assert loss.dtype == jnp.float16 and float(loss) == 0.75
    assert int(state.global_step) == 0 and float(opt.loss_scale(state)) == 2.0**15
    state, _ = opt.minimize(half_loss, state)
    np.testing.assert_allclose(state.params, [0.975, 1.975])


def test_float16_and_bfloat16_variables_keep_their_dtype():
    opt = _scaled(fg.train.AdamOptimizer(0.1))
    params = {"h": jnp.array([1.0, 2.0], jnp.float16), "b": jnp.array([3.0], jnp.bfloat16)}
    state = opt.init(params)
    gvs = opt.compute_gradients(
        lambda p: (
            jnp.sum(p["h"] ** 2).astype(jnp.float32) + jnp.sum(p["b"] ** 2).astype(jnp.float32)
        ),
        state,
    )
    assert [g.dtype for g, _ in gvs] == [jnp.bfloat16, jnp.float16]
    np.testing.assert_array_equal(gvs[1][0], [2.0, 4.0])
    state = opt.apply_gradients(gvs, state)
    assert jax.tree.map(lambda p: p.dtype, state.params) == jax.tree.map(lambda p: p.dtype, params)


@JIT
def test_minimize_returns_the_unscaled_loss_and_aux(jit):
    opt = _scaled(fg.train.GradientDescentOptimizer(0.1))

    def with_aux(params, x, *, offset):
        loss = loss_fn(params, x) + offset
        return loss, {"twice": 2 * loss}

    step = compiled(lambda s: opt.minimize(with_aux, s, _x(0), has_aux=True, offset=1.5), jit)
    state, (loss, aux) = step(opt.init(PARAMS))
    expected = loss_fn(PARAMS, _x(0)) + 1.5
    assert float(loss) == float(expected)
    assert float(aux["twice"]) == float(2 * expected)
    assert int(state.global_step) == 1


def test_grad_loss_var_list_has_aux_and_kwargs_pass_through():
    inner = fg.train.MomentumOptimizer(0.1, 0.9)
    opt = _scaled(inner)
    state = opt.init(PARAMS)

    def with_aux(params, x, *, power):
        per_element = (params["w"] * x) ** power
        return per_element, {"sum": jnp.sum(per_element)}

    options = {
        "var_list": ["w"],
        "grad_loss": jnp.array([0.5, -1.0]),
        "has_aux": True,
        "power": 2,
    }
    (gvs, aux) = opt.compute_gradients(with_aux, state, _x(0), **options)
    (expected, expected_aux) = inner.compute_gradients(with_aux, state.params, _x(0), **options)
    assert gvs[0][0] is None and expected[0][0] is None  # b: not in var_list
    np.testing.assert_allclose(gvs[1][0], expected[1][0], rtol=1e-6)
    assert [v for _, v in gvs] == jax.tree.leaves(state.params)
    chex.assert_trees_all_close(aux, expected_aux)
    new, (loss, _) = opt.minimize(with_aux, state, _x(0), **options)
    np.testing.assert_array_equal(new.params["b"], PARAMS["b"])
    np.testing.assert_allclose(loss, with_aux(PARAMS, _x(0), power=2)[0])


@JIT
def test_compute_process_apply_with_filtered_pairs(jit):
    opt = _scaled(fg.train.GradientDescentOptimizer(0.5), growth_steps=1)

    def step(state, x):
        gvs = opt.compute_gradients(loss_fn, state, x)
        kept = [(fg.clip_by_norm(g, 1.0), v) for g, v in reversed(gvs) if g is not None]
        return opt.apply_gradients(kept, state)

    step = compiled(step, jit)
    state = opt.init(PARAMS)
    for i in range(4):
        state = step(state, _x(i, bad_steps=(2,)))
    assert int(state.global_step) == 3
    assert float(opt.loss_scale(state)) == 2.0**12  # x2, x2, /2, x2


def test_an_optax_adam_trains_as_plain_optax_with_the_bad_steps_left_out():
    with standard_promotion:
        opt = _scaled(fg.train.Optimizer(optax.adam(0.1)))
        state = opt.init(PARAMS)
        tx = optax.adam(0.1)
        params, opt_state = PARAMS, tx.init(PARAMS)
        step = jax.jit(lambda s, x: opt.minimize(loss_fn, s, x)[0])
        for i in range(5):
            state = step(state, _x(i, bad_steps=(1, 3)))
            if i not in (1, 3):
                updates, opt_state = tx.update(jax.grad(loss_fn)(params, _x(i)), opt_state)
                params = optax.apply_updates(params, updates)
        chex.assert_trees_all_close(state.params, params, rtol=1e-6)
        chex.assert_trees_all_close(state.opt_state.inner_state, opt_state, rtol=1e-6)


def test_a_non_finite_micro_batch_stays_out_of_the_accumulation_buffer():
    inner = fg.train.Optimizer(fg.train.accumulate_gradients(optax.sgd(1.0), 2))
    opt = _scaled(inner)
    state = opt.init(jnp.float32(0.0))
    for g in [1.0, jnp.nan, 3.0]:
        state = opt.apply_gradients([(jnp.float32(g), None)], state)
    assert float(state.params) == -2.0  # one step on the mean of 1 and 3
    assert int(state.global_step) == 2


def test_skip_nonfinite_inside_sees_only_finite_steps():
    inner = fg.train.Optimizer(fg.train.skip_nonfinite(optax.sgd(1.0)))
    opt = _scaled(inner)
    state = opt.apply_gradients([(jnp.float32(jnp.inf), None)], opt.init(jnp.float32(0.0)))
    assert fg.train.skipped_steps(state).total == 0  # the loss scale skipped it first
    assert int(state.global_step) == 0


def test_vmap_over_states_skips_only_the_member_with_a_nan():
    opt = _scaled(fg.train.GradientDescentOptimizer(0.5))
    states = jax.vmap(opt.init)(jnp.array([1.0, 2.0, 3.0]))
    grads = jnp.array([1.0, jnp.nan, 1.0])
    new = jax.jit(jax.vmap(lambda g, s: opt.apply_gradients([(g, None)], s)))(grads, states)
    np.testing.assert_array_equal(new.params, [0.5, 2.0, 2.5])
    np.testing.assert_array_equal(new.global_step, [1, 0, 1])
    np.testing.assert_array_equal(opt.loss_scale(new), [2.0**10, 2.0**9, 2.0**10])


def test_a_training_loop_in_lax_scan():
    opt = _scaled(fg.train.AdamOptimizer(0.1), growth_steps=2)
    xs = jnp.stack([_x(i, bad_steps=(3,)) for i in range(6)])
    state, losses = jax.lax.scan(lambda s, x: opt.minimize(loss_fn, s, x), opt.init(PARAMS), xs)
    assert losses.shape == (6,)
    assert int(state.global_step) == 5
    assert float(opt.loss_scale(state)) == 2.0**11  # up after step 2, down at 4, up at 6


def test_set_learning_rate_reaches_the_wrapped_optimizer():
    opt = _scaled(fg.train.GradientDescentOptimizer(0.1))
    state = fg.train.set_learning_rate(opt.init(jnp.float32(1.0)), 0.5)
    state = opt.apply_gradients([(jnp.float32(1.0), None)], state)
    assert float(state.params) == 0.5


def test_optimizers_of_a_group_wrapped_alike_share_one_scale():
    """D and G wrapped alike step one state: a skipped D step lowers the one scale and
    leaves every slot as it was; the finite steps are the group's own."""
    group = fg.train.OptimizerGroup(
        D=(fg.train.AdamOptimizer(0.1), ["w"]), G=(fg.train.MomentumOptimizer(0.5, 0.9), ["b"])
    )
    d_opt, g_opt = _scaled(group["D"]), _scaled(group["G"])
    state, reference = d_opt.init(PARAMS), group.init(PARAMS)
    assert sorted(state.opt_state.inner_state) == ["D", "G"]
    state, _ = d_opt.minimize(loss_fn, state, _x(0))
    reference, _ = group["D"].minimize(loss_fn, reference, _x(0))
    state, _ = g_opt.minimize(loss_fn, state, _x(1))
    reference, _ = group["G"].minimize(loss_fn, reference, _x(1))
    skipped, _ = d_opt.minimize(loss_fn, state, _x(2, bad_steps=(2,)))
    chex.assert_trees_all_equal(skipped.params, state.params)
    chex.assert_trees_all_equal(skipped.opt_state.inner_state, state.opt_state.inner_state)
    assert float(g_opt.loss_scale(skipped)) == 2.0**9
    state, _ = d_opt.minimize(loss_fn, skipped, _x(3))
    reference, _ = group["D"].minimize(loss_fn, reference, _x(3))
    chex.assert_trees_all_close(state.params, reference.params, rtol=1e-6)
    chex.assert_trees_all_close(state.opt_state.inner_state, reference.opt_state, rtol=1e-6)
    assert int(state.global_step) == int(reference.global_step) == 3


def test_a_loss_scale_optimizer_inside_a_group_is_refused():
    opt = _scaled(fg.train.AdamOptimizer(0.1))
    with pytest.raises(TypeError, match=r"D= is LossScaleOptimizer"):
        fg.train.OptimizerGroup(D=opt)


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        pytest.param(
            {"opt": optax.adam(0.1)},
            TypeError,
            r"opt is a GradientTransformationExtraArgs.*fg\.train\.Optimizer\(tx\)",
            id="optax",
        ),
        pytest.param(
            {"opt": fg.train.OptimizerGroup(D=fg.train.AdamOptimizer())},
            TypeError,
            r"opt is a OptimizerGroup.*LossScaleOptimizer\(group\['D'\]\)",
            id="group",
        ),
        pytest.param(
            {"opt": fg.train.LossScaleOptimizer(fg.train.AdamOptimizer())},
            TypeError,
            r"opt is a LossScaleOptimizer.*wrap the optimizer once",
            id="twice",
        ),
        pytest.param({"opt": "adam"}, TypeError, r"opt is a str.*AdamOptimizer", id="string"),
        pytest.param(
            {"dynamic": "dynamic", "growth_steps": 2.5},
            TypeError,
            r"dynamic='dynamic' is not True or False; growth_steps=2\.5 is not an integer",
            id="types",
        ),
        pytest.param(
            {"initial_scale": None, "multiplier": True},
            TypeError,
            r"initial_scale=None is not a number; multiplier=True is not a number",
            id="not_numbers",
        ),
        pytest.param(
            {"initial_scale": 0.5, "growth_steps": 0, "multiplier": 1.0},
            ValueError,
            r"initial_scale=0\.5 is not in \[1, float32 max\].*; growth_steps=0 is not in "
            r"\[1, 2\*\*31 - 1\]; multiplier=1\.0 is not in \(1, float32 max\]",
            id="out_of_range",
        ),
        pytest.param(
            {"initial_scale": 1e39, "multiplier": float("nan")},
            ValueError,
            r"initial_scale=1e\+39 is not in.*multiplier=nan is not in",
            id="beyond_float32",
        ),
        pytest.param(
            {"dynamic": False, "growth_steps": 10},
            ValueError,
            r"dynamic=False keeps the scale fixed \(drop them, or pass dynamic=True\)",
            id="fixed_with_growth",
        ),
    ],
)
def test_bad_arguments_are_clear_errors(kwargs, error, match):
    arguments = {"opt": fg.train.GradientDescentOptimizer(0.1), **kwargs}
    with pytest.raises(error, match=r"^fg\.train\.LossScaleOptimizer\(opt, .*" + match):
        fg.train.LossScaleOptimizer(**arguments)


def test_compute_gradients_takes_the_state():
    opt = _scaled(fg.train.AdamOptimizer())
    with pytest.raises(TypeError, match=r"state is a dict.*pass the state itself, not state\."):
        opt.compute_gradients(loss_fn, PARAMS, _x(0))


def test_a_state_of_another_optimizer_is_refused():
    opt = _scaled(fg.train.AdamOptimizer())
    other = fg.train.AdamOptimizer().init(PARAMS)
    for call in [
        lambda: opt.minimize(loss_fn, other, _x(0)),
        lambda: opt.apply_gradients([(jnp.ones(2), other.params["w"])], other),
        lambda: opt.loss_scale(other),
    ]:
        with pytest.raises(ValueError, match=r"not the LossScaleState.*state = opt\.init"):
            call()


def test_tensorflow_habits_get_the_call_to_write():
    opt = _scaled(fg.train.AdamOptimizer())
    state = opt.init(PARAMS)
    gvs = opt.compute_gradients(loss_fn, state, _x(0))
    with pytest.raises(TypeError, match=r"the TrainState to update is missing"):
        opt.apply_gradients(gvs)
    with pytest.raises(TypeError, match=r"global_step= is TensorFlow's argument"):
        opt.apply_gradients(gvs, state, global_step=3)
    with pytest.raises(TypeError, match=r"global_step= is TensorFlow's argument"):
        opt.minimize(loss_fn, state, _x(0), global_step=3)
    with pytest.raises(TypeError, match=r"state is the integer 3.*TensorFlow's global_step"):
        opt.apply_gradients(gvs, 3)
    with pytest.raises(TypeError, match=r"params is a fg\.train\.TrainState"):
        opt.init(state)


def test_a_loss_container_without_has_aux_is_named():
    opt = _scaled(fg.train.AdamOptimizer())
    with pytest.raises(ValueError, match=r"^fg\.train\.LossScaleOptimizer\.minimize.*has_aux=True"):
        opt.minimize(lambda p: (loss_fn(p, _x(0)), 1.0), opt.init(PARAMS))


def test_no_gradients_names_the_cut():
    opt = _scaled(fg.train.AdamOptimizer())
    state = opt.init(PARAMS)
    cut = lambda p: jnp.sum(jax.lax.stop_gradient(p["w"])) + jnp.floor(p["b"])  # noqa: E731
    with pytest.raises(ValueError, match=r"^fg\.train\.LossScaleOptimizer\.minimize.*No gradients"):
        opt.minimize(cut, state)
    with pytest.raises(
        ValueError, match=r"^fg\.train\.LossScaleOptimizer\.apply_gradients.*No gradients"
    ):
        opt.apply_gradients([(None, v) for v in jax.tree.leaves(state.params)], state)


def test_tf_checkpoints_hold_its_scale_and_the_wrapped_optimizers_slots(tmp_path):
    opt = _scaled(fg.train.AdamOptimizer(0.1))
    state, _ = opt.minimize(loss_fn, opt.init(PARAMS), _x(0))
    prefix = fg.train.save_tf_checkpoint(tmp_path / "model.ckpt-1", state, opt)
    restored = fg.train.restore_tf_checkpoint(prefix, opt.init(PARAMS), opt)
    chex.assert_trees_all_equal(restored, state)
    # One scale around a group's state, as LossScaleOptimizer(group["D"]) makes it.
    group = fg.train.OptimizerGroup(D=(fg.train.AdamOptimizer(0.1), ["w"]))
    scaled = _scaled(group["D"])
    state, _ = scaled.minimize(loss_fn, scaled.init(PARAMS), _x(0))
    prefix = fg.train.save_tf_checkpoint(tmp_path / "model.ckpt-2", state, scaled)
    chex.assert_trees_all_equal(
        fg.train.restore_tf_checkpoint(prefix, scaled.init(PARAMS), scaled), state
    )


def test_tensorflow_conventions_reach_the_scaled_backward_pass():
    """TensorFlow's gradient of abs at 0 (0) and of minimum at a tie (to the first
    argument), through the scaled cotangent."""
    opt = _scaled(fg.train.GradientDescentOptimizer(0.1))
    loss = fg.tensorflow_conventions(lambda p, x: jnp.sum(jnp.minimum(1.0, jnp.abs(p["w"] * x))))
    state = opt.init({"w": jnp.array([0.0, 1.0, 0.5])})
    [(g, _)] = opt.compute_gradients(loss, state, jnp.float32(1.0))
    np.testing.assert_array_equal(g, [0.0, 0.0, 1.0])
