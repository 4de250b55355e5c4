"""Loss functions as users write them: has_aux, grad_loss, keyword arguments, non-scalar
losses and leaves that are not variables — each against plain jax.value_and_grad + optax."""

import chex
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import funcgrad as fg
from tests.train_steps import JIT
from tests.train_steps import compiled

PARAMS = {"w": jnp.array([1.0, -2.0, 0.5]), "b": jnp.float32(0.25)}
X = jnp.array([[1.0, 0.0, 2.0], [0.5, -1.0, 1.0]])
Y = jnp.array([1.0, -1.0])


def loss_with_aux(params, x, y):
    """JAX's and flax's everyday (loss, aux) form."""
    pred = x @ params["w"] + params["b"]
    return jnp.mean((pred - y) ** 2), {"w_sq_norm": jnp.sum(params["w"] ** 2), "pred": pred}


@JIT
def test_has_aux_differentiates_the_loss_only(jit) -> None:
    opt = fg.train.GradientDescentOptimizer(0.1)
    compute = compiled(
        lambda p, x, y: opt.compute_gradients(loss_with_aux, p, x, y, has_aux=True), jit
    )
    for _ in range(2):
        gvs, aux = compute(PARAMS, X, Y)
    (_, expected_aux), grads = jax.value_and_grad(loss_with_aux, has_aux=True)(PARAMS, X, Y)
    chex.assert_trees_all_close(
        dict(zip(fg.train.variable_names(PARAMS), [g for g, _ in gvs], strict=True)),
        grads,
        rtol=1e-6,
    )
    chex.assert_trees_all_close(aux, expected_aux, rtol=1e-6)


def test_has_aux_gradient_is_not_the_sum_of_loss_and_aux() -> None:
    """The reported case: a w_sq_norm aux summed in gave [3, 3, 3] for [1, 1, 1]."""
    opt = fg.train.GradientDescentOptimizer(0.1)
    params = {"w": jnp.ones(3)}
    gvs, aux = opt.compute_gradients(
        lambda p, x: (jnp.sum(p["w"] * x), {"w_sq_norm": jnp.sum(p["w"] ** 2)}),
        params,
        jnp.ones(3),
        has_aux=True,
    )
    np.testing.assert_array_equal(gvs[0][0], [1.0, 1.0, 1.0])
    assert float(aux["w_sq_norm"]) == 3.0


@JIT
def test_minimize_with_has_aux_matches_plain_optax(jit) -> None:
    opt = fg.train.MomentumOptimizer(0.1, 0.9)
    step = compiled(lambda s, x, y: opt.minimize(loss_with_aux, s, x, y, has_aux=True), jit)
    tx = optax.sgd(0.1, momentum=0.9)
    params, tx_state, state = PARAMS, tx.init(PARAMS), opt.init(PARAMS)
    for _ in range(3):
        state, (loss, aux) = step(state, X, Y)
        (ref_loss, ref_aux), grads = jax.value_and_grad(loss_with_aux, has_aux=True)(params, X, Y)
        updates, tx_state = tx.update(grads, tx_state, params)
        params = optax.apply_updates(params, updates)
        np.testing.assert_allclose(loss, ref_loss, rtol=1e-6)
        chex.assert_trees_all_close(aux, ref_aux, rtol=1e-6)
        chex.assert_trees_all_close(state.params, params, rtol=1e-6)
    assert int(state.global_step) == 3


@pytest.mark.parametrize(
    ("loss_fn", "shown"),
    [
        pytest.param(
            lambda p: (jnp.sum(p["w"]), {"w_sq_norm": jnp.sum(p["w"] ** 2)}),
            r"a tuple \(float32\[\], \{'w_sq_norm': float32\[\]\}\)",
            id="tuple",
        ),
        pytest.param(
            lambda p: [jnp.sum(p["w"]), p["b"]], r"a list \[float32\[\], float32\[\]\]", id="list"
        ),
        pytest.param(
            lambda p: {"loss": jnp.sum(p["w"]), "acc": p["b"]},
            r"a dict \{'acc': float32\[\], 'loss': float32\[\]\}",
            id="dict",
        ),
    ],
)
@pytest.mark.parametrize("method", ["compute_gradients", "minimize"])
@JIT
def test_a_container_loss_without_has_aux_names_has_aux(loss_fn, shown, method, jit) -> None:
    opt = fg.train.GradientDescentOptimizer(0.1)
    first = PARAMS if method == "compute_gradients" else opt.init(PARAMS)
    call = compiled(lambda first: getattr(opt, method)(loss_fn, first), jit)
    with pytest.raises(
        ValueError,
        match=rf"{method}\(loss_fn, .*loss_fn returned {shown}, not one loss array; if it "
        r"returns \(loss, aux\), pass has_aux=True",
    ):
        call(first)


@pytest.mark.parametrize(
    ("loss_fn", "has_aux", "error", "match"),
    [
        pytest.param(
            lambda p: jnp.sum(p["w"]),
            True,
            TypeError,
            r"has_aux=True, so loss_fn must return a pair \(loss, aux\); it returned float32\[\]",
            id="not_a_pair",
        ),
        pytest.param(
            lambda p: ((jnp.sum(p["w"]), p["b"]), None),
            True,
            ValueError,
            r"the loss in loss_fn's \(loss, aux\) is a tuple.*put one loss array first",
            id="loss_is_a_tuple",
        ),
        pytest.param(
            lambda p: (jnp.sum(p["w"]), {"tag": "epoch"}),
            True,
            TypeError,
            r"aux\['tag'\] is a str; aux passes through the differentiation",
            id="aux_not_arrays",
        ),
        pytest.param(
            lambda p: None,
            False,
            TypeError,
            r"loss_fn returned None; .*a missing return statement",
            id="returns_none",
        ),
        pytest.param(
            lambda p: "loss",
            False,
            TypeError,
            "loss_fn returned a str 'loss', not an array",
            id="a_string",
        ),
    ],
)
def test_bad_loss_outputs(loss_fn, has_aux, error, match) -> None:
    opt = fg.train.GradientDescentOptimizer(0.1)
    with pytest.raises(error, match=r"compute_gradients\(loss_fn, params, \*args\): " + match):
        opt.compute_gradients(loss_fn, PARAMS, has_aux=has_aux)


@JIT
def test_a_non_scalar_loss_is_summed_as_tf_gradients_does(jit) -> None:
    def per_example(params, x, y):
        return (x @ params["w"] + params["b"] - y) ** 2  # shape (2,)

    opt = fg.train.GradientDescentOptimizer(0.1)
    step = compiled(lambda s, x, y: opt.minimize(per_example, s, x, y), jit)
    state, loss = step(opt.init(PARAMS), X, Y)
    grads = jax.grad(lambda p: jnp.sum(per_example(p, X, Y)))(PARAMS)
    chex.assert_trees_all_close(
        state.params, jax.tree.map(lambda p, g: p - 0.1 * g, PARAMS, grads), rtol=1e-6
    )
    np.testing.assert_allclose(loss, per_example(PARAMS, X, Y), rtol=1e-6)  # as returned


@JIT
def test_grad_loss_is_the_cotangent_of_the_loss(jit) -> None:
    def per_example(params, x, y):
        return (x @ params["w"] + params["b"] - y) ** 2

    weights = jnp.array([2.0, -0.5])
    opt = fg.train.GradientDescentOptimizer(0.1)
    compute = compiled(
        lambda p, x, y, w: opt.compute_gradients(per_example, p, x, y, grad_loss=w), jit
    )
    gvs = compute(PARAMS, X, Y, weights)
    _, vjp = jax.vjp(lambda p: per_example(p, X, Y), PARAMS)
    (expected,) = vjp(weights)
    np.testing.assert_allclose(gvs[0][0], expected["b"], rtol=1e-6)  # "b" sorts first
    np.testing.assert_allclose(gvs[1][0], expected["w"], rtol=1e-6)


def test_grad_loss_scales_a_scalar_loss_in_minimize() -> None:
    opt = fg.train.GradientDescentOptimizer(0.5)
    state, _ = opt.minimize(lambda w: 3.0 * w, opt.init(jnp.float32(1.0)), grad_loss=2.0)
    assert float(state.params) == pytest.approx(1.0 - 0.5 * 6.0)


@pytest.mark.parametrize(
    ("grad_loss", "match"),
    [
        pytest.param(jnp.ones(3), r"grad_loss has shape \(3,\), the loss \(2,\)", id="shape"),
        pytest.param(
            np.ones(2, np.float64), "grad_loss has dtype float64, the loss float32", id="dtype"
        ),
    ],
)
def test_grad_loss_must_match_the_loss(grad_loss, match) -> None:
    opt = fg.train.GradientDescentOptimizer(0.1)
    with pytest.raises(ValueError, match=r"compute_gradients.*" + match + ".*or None for ones"):
        opt.compute_gradients(lambda p, x: x @ p["w"] + p["b"], PARAMS, X, grad_loss=grad_loss)


@JIT
def test_keyword_arguments_go_to_the_loss(jit) -> None:
    def loss_fn(params, x, *, scale, train):
        return scale * jnp.sum(x @ params["w"]) + (params["b"] if train else 0.0)

    opt = fg.train.GradientDescentOptimizer(1.0)
    step = compiled(lambda s, x, k: opt.minimize(loss_fn, s, x, scale=k, train=True), jit)
    state, loss = step(opt.init(PARAMS), X, jnp.float32(2.0))
    expected = jax.grad(lambda p: loss_fn(p, X, scale=2.0, train=True))(PARAMS)
    chex.assert_trees_all_close(
        state.params, jax.tree.map(lambda p, g: p - g, PARAMS, expected), rtol=1e-6
    )
    np.testing.assert_allclose(loss, loss_fn(PARAMS, X, scale=2.0, train=True), rtol=1e-6)


def test_keywords_named_like_the_methods_arguments_reach_the_loss() -> None:
    opt = fg.train.GradientDescentOptimizer(1.0)
    gvs = opt.compute_gradients(lambda p, *, params: p * params, jnp.float32(2.0), params=3.0)
    state, loss = opt.minimize(
        lambda p, *, state, loss_fn: p * state * loss_fn,
        opt.init(jnp.float32(2.0)),
        state=3.0,
        loss_fn=2.0,
    )
    assert float(gvs[0][0]) == 3.0 and float(loss) == 12.0 and float(state.params) == -4.0


def test_a_loss_that_takes_global_step_gets_it() -> None:
    opt = fg.train.GradientDescentOptimizer(1.0)
    state = opt.init(jnp.float32(1.0))
    state, loss = opt.minimize(lambda w, global_step: w * global_step, state, global_step=3.0)
    assert float(loss) == 3.0 and float(state.params) == -2.0


@JIT
def test_leaves_that_are_not_variables_are_carried_unchanged(jit) -> None:
    params = {"w": jnp.array([1.0, 2.0]), "count": jnp.int32(7), "flag": jnp.bool_(True)}

    def loss_fn(p, x):
        return jnp.sum(p["w"] * x) * jnp.where(p["flag"], 1.0, 0.0) + p["count"].astype(jnp.float32)

    opt = fg.train.AdamOptimizer(0.1)
    step = compiled(lambda s, x: opt.minimize(loss_fn, s, x), jit)
    state = opt.init(params)
    assert fg.train.variable_names(params) == ["w"]
    for _ in range(2):
        state, _ = step(state, jnp.array([1.0, -1.0]))
    assert int(state.params["count"]) == 7 and bool(state.params["flag"])
    assert state.params["count"].dtype == jnp.int32
    np.testing.assert_allclose(state.params["w"], [0.8, 2.2], rtol=1e-5)  # Adam: lr * sign


def test_a_function_leaf_is_no_variable_and_comes_back_as_itself() -> None:
    params = {"w": jnp.array([1.0, 2.0]), "activation": jax.nn.relu, "name": "layer"}

    def loss_fn(p, x):
        return jnp.sum(p["activation"](p["w"] * x))

    opt = fg.train.MomentumOptimizer(0.1, 0.9)
    state = opt.init(params)
    gvs = opt.compute_gradients(loss_fn, state.params, jnp.array([1.0, 1.0]))
    assert len(gvs) == 1 and gvs[0][1] is params["w"]
    state, _ = opt.minimize(loss_fn, state, jnp.array([1.0, 1.0]))
    assert state.params["activation"] is jax.nn.relu and state.params["name"] == "layer"
    np.testing.assert_allclose(state.params["w"], [0.9, 1.9], rtol=1e-6)


def test_params_without_a_variable_are_an_error() -> None:
    opt = fg.train.GradientDescentOptimizer(0.1)
    with pytest.raises(
        ValueError, match=r"No variables to optimize: the parameters hold no floating-point"
    ):
        opt.init({"n": jnp.int32(1), "f": jax.nn.relu})


def test_scale_helpers_refuse_a_container_loss_with_the_fix() -> None:
    opt = fg.train.GradientDescentOptimizer(0.1)
    with pytest.raises(
        ValueError,
        match=r"minimize_in_microbatches.*returned a tuple.*takes no has_aux.*"
        r"lambda params, \*batch: loss_fn\(params, \*batch\)\[0\]",
    ):
        fg.train.minimize_in_microbatches(
            opt, loss_with_aux, opt.init(PARAMS), X, Y, num_microbatches=2
        )
