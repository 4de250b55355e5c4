"""fg.train.skip_nonfinite and fg.train.skipped_steps."""

import chex
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import funcgrad as fg

PARAMS = {"w": jnp.array([1.0, -2.0]), "b": jnp.float32(0.5)}
GOOD = [jnp.float32(-1.0), jnp.array([0.5, 0.25])]  # flatten order: b, w

OPTIMIZERS = [
    pytest.param(lambda: fg.train.AdamOptimizer(0.1), id="adam"),
    pytest.param(lambda: fg.train.MomentumOptimizer(0.1, 0.9), id="momentum"),
    pytest.param(lambda: fg.train.RMSPropOptimizer(0.1, centered=True), id="rmsprop"),
]


def pairs(grads):
    return [(g, None) for g in grads]


def bad(value, leaf):
    grads = list(GOOD)
    grads[leaf] = jnp.full_like(grads[leaf], value)
    return grads


@pytest.mark.parametrize("make_opt", OPTIMIZERS)
def test_a_nan_step_leaves_params_and_slots_untouched_and_counts(make_opt):
    chex.clear_trace_counter()
    inner = make_opt()
    opt = fg.train.Optimizer(fg.train.skip_nonfinite(inner.tx))
    apply = jax.jit(chex.assert_max_traces(lambda g, s: opt.apply_gradients(pairs(g), s), n=1))
    state = apply(GOOD, opt.init(PARAMS))  # slots are not all zero any more
    reference = inner.apply_gradients(pairs(GOOD), inner.init(PARAMS))
    for i, grads in enumerate([bad(jnp.nan, 0), bad(jnp.inf, 1), bad(-jnp.inf, 0)], start=1):
        new = apply(grads, state)
        chex.assert_trees_all_equal(new.params, state.params)
        chex.assert_trees_all_equal(new.opt_state.inner_state, state.opt_state.inner_state)
        assert int(new.global_step) == int(state.global_step) + 1  # the step still counts
        assert fg.train.skipped_steps(new) == (i, i)
        state = new
    state = apply(GOOD, state)
    assert fg.train.skipped_steps(state) == (0, 3)
    # The bad steps left no trace: the run equals one that never saw them.
    reference = inner.apply_gradients(pairs(GOOD), reference)
    chex.assert_trees_all_equal(state.params, reference.params)
    chex.assert_trees_all_equal(state.opt_state.inner_state, reference.opt_state)


def test_under_vmap_only_the_member_with_a_nan_skips():
    opt = fg.train.Optimizer(fg.train.skip_nonfinite(optax.sgd(0.5)))
    states = jax.vmap(opt.init)(jnp.array([1.0, 2.0, 3.0]))
    grads = jnp.array([1.0, jnp.nan, 1.0])
    new = jax.jit(jax.vmap(lambda g, s: opt.apply_gradients([(g, None)], s)))(grads, states)
    np.testing.assert_array_equal(new.params, [0.5, 2.0, 2.5])
    np.testing.assert_array_equal(fg.train.skipped_steps(new).total, [0, 1, 0])


def test_after_max_consecutive_skips_the_next_update_is_applied():
    opt = fg.train.Optimizer(fg.train.skip_nonfinite(optax.sgd(0.5), max_consecutive_skips=2))
    state = opt.init(jnp.float32(1.0))
    for _ in range(2):
        state = opt.apply_gradients([(jnp.float32(jnp.nan), None)], state)
        assert float(state.params) == 1.0
    state = opt.apply_gradients([(jnp.float32(jnp.nan), None)], state)
    assert np.isnan(state.params)
    assert fg.train.skipped_steps(state) == (3, 3)


def test_a_nan_micro_batch_is_kept_out_of_the_accumulation_buffer():
    tx = fg.train.skip_nonfinite(fg.train.accumulate_gradients(optax.sgd(1.0), 2))
    opt = fg.train.Optimizer(tx)
    state = opt.init(jnp.float32(0.0))
    for g in [1.0, jnp.nan, 3.0]:
        state = opt.apply_gradients([(jnp.float32(g), None)], state)
    assert float(state.params) == -2.0  # the mean of 1 and 3
    assert fg.train.skipped_steps(state) == (0, 1)


@pytest.mark.parametrize(
    ("value", "error"),
    [
        pytest.param(-1, ValueError, id="negative"),
        pytest.param(1.5, TypeError, id="float"),
        pytest.param(True, TypeError, id="bool"),
    ],
)
def test_max_consecutive_skips_must_be_a_non_negative_integer(value, error):
    with pytest.raises(
        error, match=r"skip_nonfinite.*max_consecutive_skips must be an integer >= 0.*pass None"
    ):
        fg.train.skip_nonfinite(optax.sgd(0.1), value)


@pytest.mark.parametrize(
    "tx",
    [
        pytest.param(optax.sgd(0.1), id="none"),
        pytest.param(
            optax.chain(
                fg.train.skip_nonfinite(optax.sgd(0.1)), fg.train.skip_nonfinite(optax.sgd(0.1))
            ),
            id="two",
        ),
    ],
)
def test_skipped_steps_needs_exactly_one_wrapper(tx):
    state = fg.train.Optimizer(tx).init(PARAMS)
    with pytest.raises(ValueError, match=r"skipped_steps\(state\): expected one skip_nonfinite"):
        fg.train.skipped_steps(state)
