"""The private connectivity analysis, on jaxprs directly."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from funcgrad._core import connectivity as _connectivity


def _connected(f, *args, outputs=None):
    jaxpr = jax.make_jaxpr(f)(*args).jaxpr
    flags = [True] * len(jaxpr.outvars) if outputs is None else outputs
    return _connectivity.connected_inputs(jaxpr, flags)


X = np.float32(1.0)


def test_data_dependency_and_cut():
    assert _connected(lambda a, b, c: a * jnp.round(b), X, X, X) == [True, False, False]


def test_selected_outputs_only():
    assert _connected(lambda a, b: (a, b), X, X, outputs=[False, True]) == [False, True]


def test_integer_outputs_never_carry_gradients():
    assert _connected(lambda a: a.astype(jnp.int32), X) == [False]


def test_custom_rules_ignore_cuts_inside():
    @jax.custom_jvp
    def f(x):
        return jax.lax.stop_gradient(x)

    f.defjvp(lambda p, t: (f(*p), t[0]))
    assert _connected(f, X) == [True]


def test_integer_pow_zero_is_constant():
    assert _connected(lambda a: jax.lax.integer_pow(a, 0), X) == [False]
    assert _connected(lambda a: jax.lax.integer_pow(a, 1), X) == [True]


@pytest.mark.parametrize("length", [1, 4])
def test_scan_carry_reaches_through_rotation(length):
    # The carry rotates (x, 0, 0) -> (0, x, 0) -> ...: only a fixed point over the carry
    # sees that x reaches the third slot.
    def f(x):
        def body(c, _):
            a, b, d = c
            return (d, a, b), None

        (_, _, last), _ = jax.lax.scan(body, (x, X * 0, X * 0), None, length=length)
        return last

    assert _connected(f, X) == [True]


def test_while_predicate_is_not_a_path():
    def f(x, y):
        return jax.lax.while_loop(lambda c: c < x, lambda c: c + y, X)

    assert _connected(f, X, X) == [False, True]


def test_cond_index_is_not_a_path():
    def f(i, x):
        return jax.lax.cond(i > 0, lambda v: v, lambda v: 2 * v, x)

    assert _connected(f, X, X) == [False, True]


def test_shard_map_is_followed():
    mesh = jax.make_mesh((1,), ("d",), devices=jax.devices()[:1])
    spec = jax.sharding.PartitionSpec()
    f = jax.shard_map(lambda a, b: a * jnp.floor(b), mesh=mesh, in_specs=spec, out_specs=spec)
    assert _connected(f, X, X) == [True, False]


# --- input_reach: the same pass, recording what cuts an unconnected input -------------


def _scan_rotation(x, y):
    def body(c, _):
        a, b, d = c
        return (d, jax.lax.stop_gradient(a), b * y), None

    return jax.lax.scan(body, (x, X * 0, X * 0), None, length=4)[0][2]


def _while_of(x, y):
    return jax.lax.while_loop(lambda c: c < x, lambda c: c + jnp.floor(y), X)


def _cond_of(x, y):
    return jax.lax.cond(x > 0, lambda v: jnp.round(v), lambda v: 2 * v, y)


@jax.custom_jvp
def _straight_round(x):
    return jnp.round(x)


_straight_round.defjvp(lambda p, t: (_straight_round(p[0]), t[0]))

FUNCTIONS = [
    pytest.param(lambda a, b: a * jnp.round(b), id="round"),
    pytest.param(lambda a, b: (a > 0).astype(jnp.float32) * b, id="comparison"),
    pytest.param(lambda a, b: jnp.argmax(jnp.stack([a, b])).astype(jnp.float32), id="argmax"),
    pytest.param(lambda a, b: jax.jit(lambda u: jnp.floor(u) * b)(a), id="jit"),
    pytest.param(_scan_rotation, id="scan"),
    pytest.param(_while_of, id="while"),
    pytest.param(_cond_of, id="cond"),
    pytest.param(lambda a, b: _straight_round(a) * jax.lax.stop_gradient(b), id="custom_jvp"),
    pytest.param(lambda a, b: a * 2.0, id="unused"),
]


@pytest.mark.parametrize("f", FUNCTIONS)
def test_recording_decides_connectivity_as_without(f):
    jaxpr = jax.make_jaxpr(f)(X, X).jaxpr
    reach = _connectivity.input_reach(jaxpr, [True])
    assert [r.connected for r in reach] == _connectivity.connected_inputs(jaxpr, [True])
    for r in reach:
        assert r.used or not r.connected
        if not r.connected:  # used, yet not connected: a cut stands on its way
            assert bool(r.cuts) == r.used


def test_a_cut_is_named_by_its_site():
    jaxpr = jax.make_jaxpr(FUNCTIONS[3].values[0])(X, X).jaxpr
    reach = _connectivity.input_reach(jaxpr, [True])
    [site] = reach[0].cuts
    assert [e.primitive.name for e in site] == ["jit", "floor"]
    assert site[0] is jaxpr.eqns[0]
    assert reach[1] == _connectivity.Reach(connected=True, used=True)


def test_cuts_are_followed_up_to_the_first_connected_value():
    def f(a, b):
        h = jax.lax.stop_gradient(jnp.round(a)) + b  # h is connected through b
        return h + jnp.floor(h)

    jaxpr = jax.make_jaxpr(f)(X, X).jaxpr
    [a, _] = _connectivity.input_reach(jaxpr, [True])
    assert sorted(site[-1].primitive.name for site in a.cuts) == ["round", "stop_gradient"]


def test_while_predicate_is_a_data_path_when_recording():
    jaxpr = jax.make_jaxpr(_while_of)(X, X).jaxpr
    x, y = _connectivity.input_reach(jaxpr, [True])
    assert (x.connected, x.used) == (False, True)
    assert [[e.primitive.name for e in s] for s in x.cuts] == [["while", "lt"]]
    assert [[e.primitive.name for e in s] for s in y.cuts] == [["while", "floor"]]
