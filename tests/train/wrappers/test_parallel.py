"""fg.train.data_parallel and fg.train.shard_map_minimize on 8 fake CPU devices."""

import contextlib

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import AxisType

import funcgrad as fg


def loss_fn(params, x, y):
    hidden = jnp.tanh(x @ params["w1"])
    return jnp.mean((hidden @ params["w2"] - y) ** 2)


def make_problem(n=32):
    rng = np.random.default_rng(0)
    params = {
        "w1": jnp.asarray(rng.normal(size=(4, 8)), jnp.float32),
        "w2": jnp.asarray(rng.normal(size=(8,)), jnp.float32),
    }
    x = jnp.asarray(rng.normal(size=(n, 4)), jnp.float32)
    y = jnp.asarray(rng.normal(size=(n,)), jnp.float32)
    return params, x, y


def mesh_of(n):
    return jax.make_mesh((n,), ("data",), devices=jax.devices()[:n])


def single_device_run(opt, state, x, y, steps):
    step = jax.jit(lambda s, x, y: opt.minimize(loss_fn, s, x, y))
    state, x, y = jax.device_put((state, x, y), jax.devices()[0])
    losses = []
    for _ in range(steps):
        state, loss = step(state, x, y)
        losses.append(loss)
    return state, losses


STEPS = [
    pytest.param(
        lambda opt, mesh, loss_fn=loss_fn: fg.train.data_parallel(
            lambda s, *batch: opt.minimize(loss_fn, s, *batch), mesh
        ),
        id="data_parallel",
    ),
    pytest.param(
        lambda opt, mesh, loss_fn=loss_fn: fg.train.shard_map_minimize(opt, loss_fn, mesh),
        id="shard_map",
    ),
]


@pytest.mark.parametrize("make_step", STEPS)
def test_the_8_device_step_equals_the_1_device_step(make_step):
    assert jax.device_count() == 8
    params, x, y = make_problem()
    opt = fg.train.AdamOptimizer(0.05)
    step = make_step(opt, mesh_of(8))
    state = opt.init(params)
    losses = []
    for _ in range(3):
        state, loss = step(state, x, y)
        losses.append(loss)
    expected, expected_losses = single_device_run(opt, opt.init(params), x, y, 3)
    chex.assert_trees_all_close(state.params, expected.params, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(losses, expected_losses, rtol=1e-6)
    for leaf in jax.tree.leaves(state):  # every output replicated over the 8 devices
        assert leaf.sharding.is_fully_replicated and len(leaf.sharding.device_set) == 8


def test_the_batch_is_split_across_the_devices():
    params, x, y = make_problem()
    opt = fg.train.GradientDescentOptimizer(0.1)
    seen = []

    def step(state, x, y):
        jax.debug.inspect_array_sharding(x, callback=seen.append)
        return opt.minimize(loss_fn, state, x, y)

    fg.train.data_parallel(step, mesh_of(8))(opt.init(params), x, y)
    [sharding] = seen
    assert sharding.shard_shape(x.shape) == (4, 4)  # 32 examples, 4 per device


@pytest.mark.parametrize("make_step", STEPS)
def test_a_batch_not_divisible_by_the_device_count_is_an_error(make_step):
    params, x, y = make_problem(30)
    opt = fg.train.GradientDescentOptimizer(0.1)
    state = opt.init(params)
    with pytest.raises(
        ValueError, match=r"divisible by the 8 devices along mesh axis 'data'.*\[30, 30\]"
    ):
        make_step(opt, mesh_of(8))(state, x, y)


def test_an_axis_the_mesh_does_not_have_is_an_error():
    opt = fg.train.GradientDescentOptimizer(0.1)
    with pytest.raises(ValueError, match=r"the mesh has axes \('data',\), not 'batch'"):
        fg.train.data_parallel(lambda s: s, mesh_of(2), axis_name="batch")
    with pytest.raises(ValueError, match=r"shard_map_minimize.*not 'batch'"):
        fg.train.shard_map_minimize(opt, loss_fn, mesh_of(2), axis_name="batch")


def test_data_parallel_step_traces_once():
    params, x, y = make_problem()
    opt = fg.train.GradientDescentOptimizer(0.1)
    step = fg.train.data_parallel(
        chex.assert_max_traces(lambda s, x, y: opt.minimize(loss_fn, s, x, y), n=1), mesh_of(4)
    )
    state = opt.init(params)
    for _ in range(3):
        state, _ = step(state, x, y)


def embedding_loss_fn(params, ids, y):
    return jnp.mean((params["E"][ids] @ params["w"] - y) ** 2)


@pytest.mark.parametrize("axis_type", [AxisType.Explicit, AxisType.Auto], ids=str)
@pytest.mark.parametrize("under_set_mesh", [False, True], ids=["", "under_set_mesh"])
@pytest.mark.parametrize("make_step", STEPS)
def test_an_embedding_model_runs_on_a_mesh_of_either_axis_type(
    make_step, axis_type, under_set_mesh
):
    """``E[ids]`` with ids sharded: jax.make_mesh's default Explicit axes refused the gather."""
    rng = np.random.default_rng(1)
    params = {
        "E": jnp.asarray(rng.normal(size=(10, 4)), jnp.float32),
        "w": jnp.asarray(rng.normal(size=(4,)), jnp.float32),
    }
    ids = jnp.asarray(rng.integers(0, 10, size=16), jnp.int32)
    y = jnp.asarray(rng.normal(size=(16,)), jnp.float32)
    opt = fg.train.AdamOptimizer(0.05)
    mesh = jax.make_mesh((8,), ("data",), axis_types=(axis_type,))
    step = make_step(opt, mesh, embedding_loss_fn)
    state = opt.init(params)
    with jax.set_mesh(mesh) if under_set_mesh else contextlib.nullcontext():
        for _ in range(2):
            state, loss = step(state, ids, y)
    expected = jax.jit(lambda s: opt.minimize(embedding_loss_fn, s, ids, y))
    want, want_loss = expected(expected(opt.init(params))[0])
    chex.assert_trees_all_close(state.params, want.params, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(loss, want_loss, rtol=1e-6)
