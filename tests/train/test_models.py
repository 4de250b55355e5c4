"""flax linen, flax nnx and equinox models trained with fg.train as users write them,
against the same training written with each library's own tools and plain optax."""

import chex
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import funcgrad as fg
from tests.train_steps import JIT
from tests.train_steps import compiled

eqx = pytest.importorskip("equinox")
nn = pytest.importorskip("flax.linen")
nnx = pytest.importorskip("flax.nnx")

X = jax.random.normal(jax.random.key(1), (16, 2))
Y = jnp.sum(X, axis=1, keepdims=True) ** 2


# --- equinox: the model is the parameters, activation functions and all -----------------


def _mlp():
    return eqx.nn.MLP(2, 1, 8, 2, key=jax.random.key(0))


def _eqx_loss(model, x, y):
    return jnp.mean((jax.vmap(model)(x) - y) ** 2)


@JIT
def test_equinox_model_trains_as_eqx_filter_grad_and_optax_would(jit) -> None:
    model = _mlp()
    opt = fg.train.MomentumOptimizer(0.05, 0.9)
    step = lambda s, x, y: opt.minimize(_eqx_loss, s, x, y)  # noqa: E731
    step = eqx.filter_jit(chex.assert_max_traces(step, n=1)) if jit else step
    tx = optax.sgd(0.05, momentum=0.9)
    ref, tx_state = model, tx.init(eqx.filter(model, eqx.is_inexact_array))
    state = opt.init(model)
    for _ in range(3):
        state, loss = step(state, X, Y)
        ref_loss, grads = eqx.filter_value_and_grad(_eqx_loss)(ref, X, Y)
        updates, tx_state = tx.update(grads, tx_state, eqx.filter(ref, eqx.is_inexact_array))
        ref = eqx.apply_updates(ref, updates)
        np.testing.assert_allclose(loss, ref_loss, rtol=1e-5)
    chex.assert_trees_all_close(
        eqx.filter(state.params, eqx.is_array), eqx.filter(ref, eqx.is_array), rtol=1e-5
    )
    assert state.params.activation is model.activation
    assert state.params.final_activation is model.final_activation


def test_equinox_variable_names_leave_out_functions() -> None:
    names = fg.train.variable_names(_mlp())
    assert names == [f"layers/{i}/{w}" for i in range(3) for w in ("weight", "bias")]


def test_equinox_dropout_key_as_a_keyword_and_its_p_stays() -> None:
    model = eqx.nn.Sequential(
        [
            eqx.nn.Linear(2, 8, key=jax.random.key(0)),
            eqx.nn.Lambda(jax.nn.relu),
            eqx.nn.Dropout(0.25),
            eqx.nn.Linear(8, 1, key=jax.random.key(1)),
        ]
    )

    def loss_fn(model, x, y, *, key):
        keys = jax.random.split(key, x.shape[0])
        return jnp.mean((jax.vmap(lambda xi, k: model(xi, key=k))(x, keys) - y) ** 2)

    opt = fg.train.AdamOptimizer(0.01)
    state = opt.init(model)
    gvs = opt.compute_gradients(loss_fn, state.params, X, Y, key=jax.random.key(2))
    state = opt.apply_gradients(gvs, state)
    expected = eqx.filter_grad(loss_fn)(model, X, Y, key=jax.random.key(2))
    named = dict(zip(fg.train.variable_names(model), gvs, strict=True))
    # a mean over the batch: rounded at the scale of its largest terms, not of each entry
    want = expected.layers[0].weight
    scale = float(np.abs(want).max())
    np.testing.assert_allclose(named["layers/0/weight"][0], want, rtol=1e-6, atol=1e-6 * scale)
    assert named["layers/2/p"][0] is None  # equinox stops Dropout's p gradient
    assert state.params.layers[2].p == 0.25 and state.params.layers[2].inference is False


# --- flax nnx: a State of Params, named without "/value" ---------------------------------


class _NnxMLP(nnx.Module):
    def __init__(self, rngs):
        self.hidden = nnx.Linear(2, 8, rngs=rngs)
        self.out = nnx.Linear(8, 1, rngs=rngs)

    def __call__(self, x):
        return self.out(jax.nn.relu(self.hidden(x)))


def test_nnx_names_have_no_value_suffix() -> None:
    _, params = nnx.split(_NnxMLP(nnx.Rngs(0)), nnx.Param)
    assert fg.train.variable_names(params) == [
        "hidden/bias",
        "hidden/kernel",
        "out/bias",
        "out/kernel",
    ]
    opt = fg.train.GradientDescentOptimizer(0.1)
    gvs = opt.compute_gradients(
        lambda p: jnp.sum(p["out"]["bias"][...]), params, var_list=["out/bias"]
    )
    assert [g is None for g, _ in gvs] == [True, True, False, True]


@JIT
def test_nnx_state_trains_as_jax_grad_and_optax_would(jit) -> None:
    graphdef, params = nnx.split(_NnxMLP(nnx.Rngs(0)), nnx.Param)

    def loss_fn(params, x, y):
        return jnp.mean((nnx.merge(graphdef, params)(x) - y) ** 2)

    opt = fg.train.Optimizer(optax.sgd(0.05, momentum=0.9))
    step = compiled(lambda s, x, y: opt.minimize(loss_fn, s, x, y), jit)
    tx = optax.sgd(0.05, momentum=0.9)
    ref, tx_state, state = params, tx.init(params), opt.init(params)
    for _ in range(3):
        state, loss = step(state, X, Y)
        ref_loss, grads = jax.value_and_grad(loss_fn)(ref, X, Y)
        updates, tx_state = tx.update(grads, tx_state, ref)
        ref = optax.apply_updates(ref, updates)
        np.testing.assert_allclose(loss, ref_loss, rtol=1e-5)
    chex.assert_trees_all_close(jax.tree.leaves(state.params), jax.tree.leaves(ref), rtol=1e-5)
    assert isinstance(state.params, nnx.State)


# --- flax linen: batch statistics through has_aux, train=True as a keyword ---------------


class _LinenNet(nn.Module):
    @nn.compact
    def __call__(self, x, train: bool):
        x = nn.Dense(8)(x)
        x = nn.BatchNorm(use_running_average=not train, momentum=0.9)(x)
        return nn.Dense(1)(nn.relu(x))


@JIT
def test_linen_batch_stats_through_has_aux_match_jax_value_and_grad(jit) -> None:
    net = _LinenNet()
    variables = net.init(jax.random.key(0), X, train=False)

    def loss_fn(params, batch_stats, x, y, train):
        out, updates = net.apply(
            {"params": params, "batch_stats": batch_stats}, x, train=train, mutable=["batch_stats"]
        )
        return jnp.mean((out - y) ** 2), updates["batch_stats"]

    opt = fg.train.GradientDescentOptimizer(0.05)
    step = compiled(
        lambda s, bs, x, y: opt.minimize(loss_fn, s, bs, x, y, train=True, has_aux=True), jit
    )
    state, stats = opt.init(variables["params"]), variables["batch_stats"]
    params, ref_stats = variables["params"], variables["batch_stats"]
    for _ in range(3):
        state, (loss, stats) = step(state, stats, X, Y)
        (ref_loss, ref_stats), grads = jax.value_and_grad(loss_fn, has_aux=True)(
            params, ref_stats, X, Y, True
        )
        params = jax.tree.map(lambda p, g: p - 0.05 * g, params, grads)
        np.testing.assert_allclose(loss, ref_loss, rtol=1e-5)
    # Dense_0/bias has a zero gradient in exact arithmetic (BatchNorm removes it).
    chex.assert_trees_all_close(state.params, params, rtol=1e-5, atol=1e-6)
    chex.assert_trees_all_close(stats, ref_stats, rtol=1e-5)
    assert fg.train.variable_names(state.params)[0] == "BatchNorm_0/bias"
