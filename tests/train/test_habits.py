"""What TF1 and optax habits write gets an error that names the funcgrad call."""

import chex
import jax
import jax.numpy as jnp
import optax
import pytest

import funcgrad as fg

PARAMS = {"w": jnp.array([1.0, 2.0])}


def _loss(params):
    return jnp.sum(params["w"] ** 2)


OPT = fg.train.GradientDescentOptimizer(0.1)
STATE = OPT.init(PARAMS)
GVS = OPT.compute_gradients(_loss, STATE.params)


@pytest.mark.parametrize(
    ("call", "match"),
    [
        pytest.param(
            lambda: OPT.minimize(_loss, PARAMS),
            r"minimize\(loss_fn, state, \*args\): state is a dict, not a fg\.train\.TrainState "
            r"\(the parameters\?\); make the state once with state = opt\.init\(params\) and "
            r"pass it: state, loss = opt\.minimize\(loss_fn, state, \*args\)\.",
            id="params_for_state_in_minimize",
        ),
        pytest.param(
            lambda: OPT.apply_gradients(GVS, PARAMS),
            r"state is a dict.*state = opt\.apply_gradients\(grads_and_vars, state\)",
            id="params_for_state_in_apply",
        ),
        pytest.param(
            lambda: OPT.apply_gradients(GVS, 0),
            r"state is the integer 0, not a fg\.train\.TrainState — TensorFlow's global_step\?"
            r".*state = opt\.apply_gradients\(grads_and_vars, state\)",
            id="tf_global_step_positional",
        ),
        pytest.param(
            lambda: OPT.apply_gradients(GVS, jnp.int32(5)),
            "TensorFlow's global_step",
            id="tf_global_step_array",
        ),
        pytest.param(
            lambda: OPT.apply_gradients(GVS, STATE, global_step=STATE.global_step),
            r"global_step= is TensorFlow's argument, and the TrainState counts the steps itself"
            r".*drop it: state = opt\.apply_gradients\(grads_and_vars, state\)",
            id="tf_global_step_keyword_in_apply",
        ),
        pytest.param(
            lambda: OPT.apply_gradients(GVS, global_step=STATE.global_step),
            r"global_step= is TensorFlow's argument",
            id="tf_global_step_instead_of_state",
        ),
        pytest.param(
            lambda: OPT.apply_gradients(GVS, STATE, name="train"),
            r"name= is TensorFlow's argument, and there are no graph operations to name",
            id="tf_name",
        ),
        pytest.param(
            lambda: OPT.apply_gradients(GVS, STATE, clip=1.0),
            r"it takes no keyword argument 'clip'",
            id="unknown_keyword",
        ),
        pytest.param(
            lambda: OPT.apply_gradients(GVS),
            r"the TrainState to update is missing; state = opt\.apply_gradients\(",
            id="no_state",
        ),
        pytest.param(
            lambda: OPT.minimize(_loss, STATE, global_step=STATE.global_step),
            r"global_step= is TensorFlow's argument.*drop it: state, loss = "
            r"opt\.minimize\(loss_fn, state, \*args\)",
            id="tf_global_step_in_minimize",
        ),
        pytest.param(
            lambda: OPT.minimize(_loss, STATE, gate_gradients=1, aggregation_method=None),
            "gate_gradients= is TensorFlow's.*aggregation_method= is TensorFlow's",
            id="tf_gating_arguments",
        ),
        pytest.param(
            lambda: OPT.compute_gradients(_loss, STATE),
            r"compute_gradients\(loss_fn, params, \*args\): params is a fg\.train\.TrainState; "
            r"pass its parameters: gvs = opt\.compute_gradients\(loss_fn, state\.params, \*args\)",
            id="state_for_params",
        ),
        pytest.param(
            lambda: OPT.init(STATE),
            r"init\(params\): params is a fg\.train\.TrainState; pass its parameters",
            id="init_of_a_state",
        ),
        pytest.param(
            lambda: OPT.apply_gradients(jax.grad(_loss)(PARAMS), STATE),
            r"grads_and_vars is a dict \{'w': float32\[2\]\}, not a list of \(gradient, "
            r"variable\) pairs \(a gradient pytree is what optax's update takes\); compute the "
            r"pairs with gvs = opt\.compute_gradients\(loss_fn, state\.params, \*args\), then "
            r"state = opt\.apply_gradients\(gvs, state\)",
            id="gradient_pytree",
        ),
    ],
)
def test_habits_get_a_type_error_that_shows_the_call(call, match) -> None:
    with pytest.raises(TypeError, match=match):
        call()


def test_zip_of_gradients_and_variables_is_taken_as_tensorflow_takes_it() -> None:
    opt = fg.train.MomentumOptimizer(0.1, momentum=0.9)
    state = opt.init(PARAMS)
    grads, variables = zip(*opt.compute_gradients(_loss, state.params), strict=True)
    by_zip = opt.apply_gradients(zip(grads, variables, strict=True), state)
    by_list = opt.apply_gradients(list(zip(grads, variables, strict=True)), state)
    chex.assert_trees_all_equal(by_zip.params, by_list.params)
    assert not jnp.array_equal(by_zip.params["w"], state.params["w"])
    jitted = jax.jit(lambda gs, s: opt.apply_gradients(zip(gs, variables, strict=True), s))
    chex.assert_trees_all_close(jitted(list(grads), state).params, by_list.params, rtol=1e-6)


def test_a_bare_gradient_for_one_array_says_what_it_is() -> None:
    """It once said "expected 1 (gradient, variable) pairs ..., got 1 items"."""
    opt = fg.train.GradientDescentOptimizer(0.1)
    state = opt.init(jnp.ones(3))
    with pytest.raises(TypeError, match=r"grads_and_vars is float32\[3\], not a list of"):
        opt.apply_gradients(jnp.ones(3), state)


@pytest.mark.parametrize("jit", [False, True], ids=["without_jit", "with_jit"])
def test_a_state_made_by_another_optimizer_is_refused(jit) -> None:
    adam_state = fg.train.AdamOptimizer(0.1).init(PARAMS)
    sgd = fg.train.GradientDescentOptimizer(0.1)
    apply = jax.jit(sgd.apply_gradients) if jit else sgd.apply_gradients
    with pytest.raises(
        ValueError,
        match=r"state\.opt_state was not made by this optimizer: it holds "
        r"InjectLearningRateState, ScaleByTfAdamState, EmptyState, this optimizer's state "
        r"holds InjectLearningRateState, EmptyState; step a state with the optimizer whose "
        r"init made it",
    ):
        apply(sgd.compute_gradients(_loss, adam_state.params), adam_state)


def test_an_optax_state_of_another_transformation_is_refused() -> None:
    state = fg.train.Optimizer(optax.adam(0.1)).init(PARAMS)
    with pytest.raises(ValueError, match=r"ScaleByAdamState.*this optimizer's state holds"):
        fg.train.Optimizer(optax.sgd(0.1, momentum=0.9)).minimize(_loss, state)
