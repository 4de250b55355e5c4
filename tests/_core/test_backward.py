"""The re-emitted backward pass: same gradients, skinny products kept as written on CPU."""

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import funcgrad as fg
from funcgrad._core import backward as _backward


def _loss(w, x):
    return jnp.sum(jnp.tanh(x @ w) ** 2)


W = jnp.asarray(np.random.default_rng(0).normal(size=(64, 4)).astype(np.float32))
X = jnp.asarray(np.random.default_rng(1).normal(size=(32, 64)).astype(np.float32))


def _barriers(f, *args):
    return str(jax.make_jaxpr(f)(*args)).count("optimization_barrier")


@pytest.mark.parametrize(
    ("shape", "skinny"),
    [
        pytest.param((784, 10), True, id="tall"),
        pytest.param((10, 784), True, id="wide"),
        pytest.param((512, 512), False, id="square"),
        pytest.param((17, 784), False, id="side_over_16"),
        pytest.param((10, 70), False, id="aspect_under_8"),
        pytest.param((4, 10, 784), False, id="three_dims"),
    ],
)
def test_which_products_are_skinny(shape, skinny):
    assert _backward._is_skinny(shape) is skinny


def test_skinny_gradient_product_gets_a_barrier_and_the_same_values():
    assert _barriers(lambda w: fg.gradients(_loss, [w, X])[0], W) == 1
    chex.assert_trees_all_close(fg.gradients(_loss, [W, X]), list(jax.grad(_loss, (0, 1))(W, X)))


def test_square_products_are_left_alone():
    w = jnp.ones((64, 64)) / 64
    assert _barriers(lambda w: fg.gradients(_loss, [w, X])[0], w) == 0


def test_the_backward_pass_is_traced_again_only_with_a_skinny_operand(monkeypatch):
    re_emitted = []
    evaluate = _backward._rewrite.evaluate
    monkeypatch.setattr(
        _backward._rewrite, "evaluate", lambda *a: re_emitted.append(1) or evaluate(*a)
    )
    square = jnp.ones((64, 64)) / 64
    chex.assert_trees_all_close(
        fg.gradients(_loss, [square, X]), list(jax.grad(_loss, (0, 1))(square, X))
    )
    assert not re_emitted
    # a skinny matrix product inside a nested function counts too
    nested = jax.jit(lambda w, x: _loss(w, x))
    got, want = fg.gradients(nested, [W, X]), jax.grad(nested, (0, 1))(W, X)
    chex.assert_trees_all_close(got, list(want), rtol=1e-5, atol=1e-6)
    assert len(re_emitted) == 1


def test_other_backends_are_left_alone(monkeypatch):
    monkeypatch.setattr(jax, "default_backend", lambda: "gpu")
    assert _barriers(lambda w: fg.gradients(_loss, [w, X])[0], W) == 0


def test_jit_vmap_and_higher_order_through_the_barrier():
    grad = lambda w, x: fg.gradients(lambda w: _loss(w, x), w)  # noqa: E731
    # jitted against jitted: XLA's fused tanh is not its op-by-op tanh (100 ulps of the
    # gradient's scale apart on JAX 0.12), and the barrier is what is tested here
    jitted = jax.jit(jax.grad(_loss))(W, X)
    chex.assert_trees_all_close(jax.jit(grad)(W, X), jitted, rtol=1e-5, atol=1e-6)
    per_example = jax.vmap(grad, in_axes=(None, 0))(W, X[:, None, :])
    chex.assert_trees_all_close(
        per_example,
        jax.vmap(jax.grad(_loss), in_axes=(None, 0))(W, X[:, None, :]),
        rtol=1e-5,
        atol=1e-6,
    )
    v = jnp.ones_like(W)
    hvp = jax.jvp(lambda w: grad(w, X), (W,), (v,))[1]
    chex.assert_trees_all_close(
        hvp, jax.jvp(jax.grad(_loss), (W, X), (v, jnp.zeros_like(X)))[1], rtol=1e-4, atol=1e-5
    )
    second = fg.gradients(lambda w: jnp.sum(grad(w, X) ** 2), W)
    chex.assert_trees_all_close(
        second, jax.grad(lambda w: jnp.sum(jax.grad(_loss)(w, X) ** 2))(W), rtol=1e-4, atol=1e-5
    )


def test_a_shard_map_in_the_backward_pass_is_re_emitted():
    mesh = jax.make_mesh((8,), ("data",))
    spec = jax.sharding.PartitionSpec
    inner = jax.shard_map(
        lambda w, x: jax.lax.psum(jnp.sum(jnp.tanh(x @ w)), "data"),
        mesh=mesh,
        in_specs=(spec(), spec("data")),
        out_specs=spec(),
    )
    x = jax.device_put(
        jnp.arange(16 * 64.0).reshape(16, 64) / 1000,
        jax.sharding.NamedSharding(mesh, spec("data")),
    )
    with jax.set_mesh(mesh):
        got = jax.jit(lambda w, x: fg.gradients(inner, [w, x]))(W, x)
        want = jax.grad(lambda w, x: jnp.sum(jnp.tanh(x @ w)), (0, 1))(W, x)
    chex.assert_trees_all_close(got, list(want), rtol=1e-5, atol=1e-6)


def test_tracing_the_backward_pass_prints_no_jaxpr(printed_jaxprs):
    # JAX names a traced callable without code by its str(), which for the function
    # jax.vjp returns prints its whole linear jaxpr: seconds of trace time on a model.
    jax.jit(lambda w: fg.gradients(_loss, [w, X])[0]).trace(W)
    assert not printed_jaxprs
