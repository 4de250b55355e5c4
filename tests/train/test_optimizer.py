"""Optimizer.compute_gradients / apply_gradients / minimize, var_list and their errors."""

import inspect
import pathlib

import chex
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import funcgrad as fg

PARAMS = {
    "W": jnp.array([[1.0, 2.0], [3.0, 4.0]]),
    "b": jnp.array([0.5, -0.5]),
    "c": jnp.float32(2.0),
}
X = jnp.array([1.0, -2.0])


def _loss(params, x):
    return jnp.sum(jnp.tanh(params["W"] @ x + params["b"]) ** 2)


def test_compute_gradients_pairs_match_jax_grad_in_flatten_order() -> None:
    opt = fg.train.GradientDescentOptimizer(0.1)
    gvs = opt.compute_gradients(_loss, PARAMS, X)
    expected = jax.grad(_loss)(PARAMS, X)
    assert fg.train.variable_names(PARAMS) == ["W", "b", "c"]
    np.testing.assert_allclose(gvs[0][0], expected["W"], rtol=1e-6)
    np.testing.assert_allclose(gvs[1][0], expected["b"], rtol=1e-6)
    assert gvs[2][0] is None  # the loss does not use "c"
    for (_, v), leaf in zip(gvs, jax.tree.leaves(PARAMS), strict=True):
        assert v is leaf


@pytest.mark.parametrize(
    "var_list",
    [
        pytest.param(["b"], id="names"),
        pytest.param(lambda name, leaf: leaf.ndim == 1, id="predicate"),
        pytest.param({"W": False, "b": True, "c": False}, id="mask"),
        pytest.param({"W": False, "b": True, "c": True}, id="mask_with_unconnected"),
    ],
)
def test_var_list_forms_select_the_same_variable(var_list) -> None:
    opt = fg.train.GradientDescentOptimizer(0.1)
    grads = [g for g, _ in opt.compute_gradients(_loss, PARAMS, X, var_list=var_list)]
    assert grads[0] is None and grads[2] is None
    np.testing.assert_allclose(grads[1], jax.grad(_loss)(PARAMS, X)["b"], rtol=1e-6)


def test_var_list_mask_may_be_a_prefix_of_the_parameters() -> None:
    params = {"layer1": {"kernel": jnp.ones(2), "bias": jnp.ones(2)}, "layer2": jnp.ones(2)}
    opt = fg.train.GradientDescentOptimizer(0.1)
    gvs = opt.compute_gradients(
        lambda p: sum(jnp.sum(x) for x in jax.tree.leaves(p)),
        params,
        var_list={"layer1": True, "layer2": False},
    )
    assert [g is None for g, _ in gvs] == [False, False, True]


def test_excluded_variables_are_not_differentiated_at_all() -> None:
    def host_only(x):  # a host callback has no derivative: differentiating it fails
        return jax.pure_callback(np.cos, jax.ShapeDtypeStruct(x.shape, x.dtype), x)

    def loss(p):
        return jnp.sum(p["w"] ** 2) + jnp.sum(host_only(p["frozen"]))

    params = {"frozen": jnp.ones(2), "w": jnp.ones(2)}
    opt = fg.train.GradientDescentOptimizer(0.1)
    with pytest.raises(ValueError, match="do not support JVP"):
        jax.grad(loss)(params)
    state, _ = jax.jit(lambda s: opt.minimize(loss, s, var_list=["w"]))(opt.init(params))
    np.testing.assert_allclose(state.params["w"], [0.8, 0.8], rtol=1e-6)
    np.testing.assert_array_equal(state.params["frozen"], params["frozen"])


def test_apply_gradients_is_a_descent_step_and_increments_global_step() -> None:
    opt = fg.train.GradientDescentOptimizer(0.5)
    state = opt.init(PARAMS)
    gvs = [(jnp.ones((2, 2)), None), (jnp.array([2.0, 2.0]), None), (None, None)]
    state = opt.apply_gradients(gvs, state)
    np.testing.assert_allclose(state.params["W"], PARAMS["W"] - 0.5)
    np.testing.assert_allclose(state.params["b"], PARAMS["b"] - 1.0)
    assert int(state.global_step) == 1


def test_apply_gradients_casts_host_gradients_to_the_variable_dtype() -> None:
    opt = fg.train.GradientDescentOptimizer(0.5)
    state = opt.init({"w": jnp.array([1.0], jnp.float32)})
    state = opt.apply_gradients([(np.array([1.0], np.float64), None)], state)
    assert state.params["w"].dtype == jnp.float32
    np.testing.assert_allclose(state.params["w"], [0.5])


def test_minimize_returns_the_loss_before_the_step() -> None:
    opt = fg.train.AdamOptimizer(0.1)
    state = opt.init(PARAMS)
    new_state, loss = opt.minimize(_loss, state, X)
    np.testing.assert_allclose(loss, _loss(PARAMS, X), rtol=1e-6)
    assert float(_loss(new_state.params, X)) < float(loss)


def test_optimizer_wraps_any_optax_transformation() -> None:
    opt = fg.train.Optimizer(optax.chain(optax.clip(0.1), optax.sgd(1.0)))
    state, _ = opt.minimize(lambda p: jnp.sum(3.0 * p), opt.init(jnp.array([1.0, 1.0])))
    np.testing.assert_allclose(state.params, [0.9, 0.9], rtol=1e-6)


def test_jitted_compute_and_apply_with_host_processing_does_not_retrace() -> None:
    opt = fg.train.MomentumOptimizer(0.1, 0.9)
    chex.clear_trace_counter()
    compute = jax.jit(chex.assert_max_traces(n=1)(lambda p, x: opt.compute_gradients(_loss, p, x)))
    apply = jax.jit(chex.assert_max_traces(n=1)(opt.apply_gradients))
    state = opt.init(PARAMS)
    for _ in range(3):
        gvs = compute(state.params, X)
        gvs = [(None if g is None else np.clip(np.asarray(g), -0.1, 0.1), v) for g, v in gvs]
        state = apply(gvs, state)
    assert int(state.global_step) == 3


# --- bad input ------------------------------------------------------------------------


def _gvs(*grads):
    return [(g, None) for g in grads]


@pytest.mark.parametrize(
    ("grads_and_vars", "match"),
    [
        pytest.param(
            _gvs(jnp.ones((2, 2)), None),
            r"2 pairs for 3 variables \['W', 'b', 'c'\] match no variable one-to-one: pair 0's "
            r"variable is None, which places a pair only in the full list.*\"Filtered and "
            r"reordered pairs\" in docs/train\.md",
            id="too_few",
        ),
        pytest.param(_gvs(None, None, None, None), "4 pairs for 3 variables", id="too_many"),
        pytest.param(
            _gvs(jnp.ones((2, 2)), jnp.ones(3), None),
            r"the gradient of 'b' has shape \(3,\), the variable \(2,\)",
            id="wrong_gradient_shape",
        ),
        pytest.param(
            [(None, None), (None, jnp.ones((2, 2))), (jnp.float32(1.0), None)],
            r"pair 1's variable \(float32\[2, 2\]\) is not a copy of 'b' \(float32\[2\]\)",
            id="pairs_out_of_order",
        ),
        pytest.param(
            _gvs(None, None, None),
            r"No gradients provided for any variable.*\['W', 'b', 'c'\]",
            id="all_none",
        ),
    ],
)
def test_apply_gradients_rejects_bad_pairs(grads_and_vars, match) -> None:
    opt = fg.train.GradientDescentOptimizer(0.1)
    with pytest.raises(
        ValueError, match=r"fg\.train\.GradientDescentOptimizer\.apply_gradients.*" + match
    ):
        opt.apply_gradients(grads_and_vars, opt.init(PARAMS))


@pytest.mark.parametrize(
    ("grads_and_vars", "match"),
    [
        pytest.param(
            [(jnp.ones((2, 2)),), (None, None), (None, None)],
            r"items \[0\] are not \(gradient, variable\) pairs",
            id="not_pairs",
        ),
        pytest.param(
            [jnp.ones((2, 2)), None, None],
            r"a list of 3 gradients, not \(gradient, variable\) pairs.*\(g, None\) for g in grads",
            id="bare_gradients",
        ),
        pytest.param([], "No variables provided", id="empty"),
    ],
)
def test_apply_gradients_rejects_what_is_not_pairs(grads_and_vars, match) -> None:
    opt = fg.train.GradientDescentOptimizer(0.1)
    error = ValueError if not grads_and_vars else TypeError
    with pytest.raises(error, match=r"GradientDescentOptimizer\.apply_gradients.*" + match):
        opt.apply_gradients(grads_and_vars, opt.init(PARAMS))


def test_minimize_of_a_loss_that_uses_no_variable_raises_no_gradients() -> None:
    opt = fg.train.AdamOptimizer()
    with pytest.raises(ValueError, match="No gradients provided for any variable"):
        opt.minimize(lambda p, x: jnp.sum(x), opt.init(PARAMS), X)


def _cut_loss(params, x):
    bucket = jnp.argmax(params["W"] @ x)  # cut: argmax
    return jnp.floor(params["b"]).sum() + bucket.astype(jnp.float32)  # cut: floor


def _line_of(marker: str) -> int:
    lines, start = inspect.getsourcelines(_cut_loss)
    return start + next(i for i, line in enumerate(lines) if marker in line)


@pytest.mark.parametrize("variant", [jax.jit, lambda f: f], ids=["with_jit", "without_jit"])
def test_no_gradients_error_names_each_variable_and_the_line_that_cuts_it(variant) -> None:
    opt = fg.train.GradientDescentOptimizer(0.1)
    state = opt.init({"W": PARAMS["W"], "b": PARAMS["b"], "unused": jnp.float32(1.0)})
    here = pathlib.Path(__file__).name
    expected = (
        rf"between variables \['W', 'b', 'unused'\] and the loss: "
        rf"W: every path is cut by argmax to int32 at {here}:{_line_of('cut: argmax')}; "
        rf"b: every path is cut by floor at {here}:{_line_of('cut: floor')}; "
        r"unused: not used by f; make the loss depend"
    )
    with pytest.raises(ValueError, match=expected):
        variant(lambda s: opt.minimize(_cut_loss, s, X))(state)
    gvs = opt.compute_gradients(_cut_loss, state.params, X)  # as in TensorFlow: no error here
    assert all(g is None for g, _ in gvs)
    with pytest.raises(ValueError, match=r"and the loss \(fg\.explain_unconnected\(loss_fn"):
        opt.apply_gradients(gvs, state)


@pytest.mark.parametrize(
    ("var_list", "error", "match"),
    [
        pytest.param(
            ["W", "kernel"],
            ValueError,
            r"var_list names 'kernel', which are not.*variables are \['W', 'b', 'c'\]",
            id="unknown_name",
        ),
        pytest.param([], ValueError, "No variables to optimize", id="empty_list"),
        pytest.param(
            lambda name, leaf: False, ValueError, "No variables to optimize", id="predicate_none"
        ),
        pytest.param({"W": True, "b": True}, ValueError, "not a prefix", id="mask_wrong_structure"),
        pytest.param({"W": 1, "b": True, "c": True}, TypeError, "Python bools", id="mask_not_bool"),
    ],
)
def test_compute_gradients_rejects_bad_var_list(var_list, error, match) -> None:
    opt = fg.train.GradientDescentOptimizer(0.1)
    with pytest.raises(error, match=r"compute_gradients.*" + match):
        opt.compute_gradients(_loss, PARAMS, X, var_list=var_list)


def test_optimizer_rejects_what_is_not_a_transformation() -> None:
    with pytest.raises(TypeError, match=r"fg\.train\.Optimizer\(tx\): tx must be an optax"):
        fg.train.Optimizer(optax.sgd)  # the factory, not the transformation
