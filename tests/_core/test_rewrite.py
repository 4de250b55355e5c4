"""The jaxpr interpreter behind gradient_override_map: every construct it follows.

The reference for each gradient is the same function written by hand with a
straight-through ``sign`` (a ``jax.custom_vjp``), so the rewrite is checked against an
independent program rather than against itself.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax
from jax.extend import core
from jax.extend import source_info_util

import funcgrad as fg
from funcgrad._core import jax_internals as _jax
from funcgrad._core import rewrite as _rewrite


@jax.custom_vjp
def ste_sign(x):
    return jnp.sign(x)


ste_sign.defvjp(lambda x: (jnp.sign(x), None), lambda _, g: (g,))


def _scan(sign):
    def f(x):
        body = lambda c, a: (c + sign(a * c), sign(a) * c)  # noqa: E731
        return lax.scan(body, jnp.float32(1.0), x)[1]

    return f


def _reverse_scan(sign):
    return lambda x: lax.scan(lambda c, a: (c * sign(a), c), jnp.float32(2.0), x, reverse=True)[1]


def _cond(sign):
    return lambda x: lax.cond(x[0] > 0, lambda z: sign(z) * z, lambda z: -sign(z), x)


def _switch(sign):
    branches = [lambda z: z, lambda z: sign(z), lambda z: 3.0 * sign(z)]
    return lambda x: lax.switch(jnp.int32(2), branches, x)


def _jit_scan_remat(sign):
    def body(c, a):
        return c, jax.checkpoint(sign)(a * c)

    return lambda x: jax.jit(lambda z: lax.scan(body, jnp.float32(2.0), z)[1])(x)


CONSTRUCTS = [
    pytest.param(lambda s: lambda x: jax.jit(lambda z: s(z) * 2.0)(x), id="jit"),
    pytest.param(lambda s: lambda x: jax.checkpoint(lambda z: s(z) * z)(x), id="remat"),
    pytest.param(_scan, id="scan"),
    pytest.param(_reverse_scan, id="scan_reverse"),
    pytest.param(_cond, id="cond"),
    pytest.param(_switch, id="switch"),
    pytest.param(lambda s: lambda x: lax.fori_loop(0, 3, lambda i, c: s(c) + c, x), id="fori"),
    pytest.param(_jit_scan_remat, id="jit_scan_remat"),
    pytest.param(
        lambda s: lambda x: jax.nn.relu(jax.jit(s)(x)) + jax.jit(lambda z: z * 3.0)(x),
        id="custom_jvp_beside",
    ),
]
TRANSFORMS = [pytest.param(lambda f: f, id="eager"), pytest.param(jax.jit, id="jit")]
X = jnp.array([0.3, -0.7, 1.5], jnp.float32)


@pytest.mark.parametrize("transform", TRANSFORMS)
@pytest.mark.parametrize("build", CONSTRUCTS)
def test_construct_values_identical_and_gradient_straight_through(build, transform) -> None:
    f = build(jnp.sign)
    g = fg.gradient_override_map(f, {"Sign": "Identity"})
    np.testing.assert_array_equal(transform(g)(X), f(X))
    grad = transform(jax.grad(lambda x: g(x).sum()))(X)
    expected = jax.grad(lambda x: build(ste_sign)(x).sum())(X)
    np.testing.assert_allclose(grad, expected, rtol=1e-6)
    assert np.any(grad != jax.grad(lambda x: f(x).sum())(X))


def test_scan_gradient_by_hand() -> None:
    # c0 = 1; y_t = sign(a_t) c_t; c_{t+1} = c_t + sign(a_t c_t), sign' := 1.
    grad = jax.grad(
        lambda x: fg.gradient_override_map(_scan(jnp.sign), {"Sign": "Identity"})(x).sum()
    )
    np.testing.assert_allclose(grad(X), [0.3, 4.0, 1.0], rtol=1e-6)


def _while(x):
    body = lambda c: (jnp.sign(c[0]) + c[0], c[1] + 1)  # noqa: E731
    return lax.while_loop(lambda c: c[1] < 3, body, (x, 0))[0]


def test_while_body_is_rewritten_values_identical() -> None:
    g = fg.gradient_override_map(_while, {"Sign": "Identity"})
    np.testing.assert_array_equal(jax.jit(g)(X), _while(X))
    (loop,) = [e for e in jax.make_jaxpr(g)(X).eqns if e.primitive.name == "while"]
    body = [e.primitive.name for e in loop.params["body_jaxpr"].jaxpr.eqns]
    assert "custom_vjp_call" in body
    assert "sign" not in body


def test_while_reverse_mode_is_jax_limit_not_ours() -> None:
    g = fg.gradient_override_map(_while, {"Sign": "Identity"})
    with pytest.raises(ValueError, match="Reverse-mode differentiation does not work"):
        jax.grad(lambda x: g(x).sum())(X)


def test_vmap_of_rewritten_scan() -> None:
    g = fg.gradient_override_map(_scan(jnp.sign), {"Sign": "Identity"})
    xs = jnp.stack([X, -X, 2 * X])
    np.testing.assert_array_equal(jax.vmap(g)(xs), jax.vmap(_scan(jnp.sign))(xs))
    grads = jax.vmap(jax.grad(lambda x: g(x).sum()))(xs)
    expected = jax.vmap(jax.grad(lambda x: _scan(ste_sign)(x).sum()))(xs)
    np.testing.assert_allclose(grads, expected, rtol=1e-6)


def test_sub_jaxpr_without_match_is_re_emitted_untouched() -> None:
    inner = jax.jit(lambda z: jnp.sin(z) * 2.0)
    f = lambda x: jnp.sign(inner(x))  # noqa: E731
    g = fg.gradient_override_map(f, {"Sign": "Identity"})
    (jit_f,) = [e for e in jax.make_jaxpr(f)(X).eqns if e.primitive.name == "jit"]
    (jit_g,) = [e for e in jax.make_jaxpr(g)(X).eqns if e.primitive.name == "jit"]
    assert str(jit_g.params["jaxpr"]) == str(jit_f.params["jaxpr"])


def test_rewritten_jit_keeps_its_name() -> None:
    def scaled_sign(z):
        return jnp.sign(z) * 2.0

    g = fg.gradient_override_map(lambda x: jax.jit(scaled_sign)(x), {"Sign": "Identity"})
    (eqn,) = jax.make_jaxpr(g)(X).eqns
    assert eqn.params["name"] == "scaled_sign"


def test_following_a_jit_prints_no_jaxpr(printed_jaxprs) -> None:
    # JAX names a callable without code by its str(); the followed jit's body is a
    # partial over its jaxpr and constants, which would be printed whole.
    g = fg.gradient_override_map(lambda x: jax.jit(jnp.sign)(x), {"Sign": "Identity"})
    np.testing.assert_array_equal(jax.grad(lambda x: jnp.sum(g(x)))(X), jnp.ones_like(X))
    assert not printed_jaxprs


def test_custom_jvp_body_is_not_followed() -> None:
    # jax.nn.relu is max(x, 0) inside a custom_jvp whose own rule gives its derivative.
    x = jnp.array([-1.0, 2.0])
    g = fg.gradient_override_map(jax.nn.relu, {"Maximum": "Identity"})
    with pytest.warns(fg.UnusedOverrideWarning, match="Maximum"):
        grad = jax.grad(lambda x: g(x).sum())(x)
    np.testing.assert_array_equal(grad, [0.0, 1.0])


@pytest.mark.parametrize(
    ("name", "fn", "x"),
    [
        pytest.param("Relu", jax.nn.relu, [-1.0, 2.0], id="relu"),
        pytest.param("Relu6", jax.nn.relu6, [-1.0, 7.0], id="relu6"),
        pytest.param("Elu", jax.nn.elu, [-30.0, 2.0], id="elu"),
        pytest.param("Softplus", jax.nn.softplus, [-30.0, 2.0], id="softplus"),
    ],
)
def test_named_functions_are_replaced_whole(name, fn, x) -> None:
    x = jnp.array(x, jnp.float32)
    g = fg.gradient_override_map(fn, {name: "Identity"})
    np.testing.assert_array_equal(g(x), fn(x))
    np.testing.assert_array_equal(jax.jit(jax.grad(lambda x: g(x).sum()))(x), [1.0, 1.0])


def test_literal_inputs_are_op_inputs_without_gradient() -> None:
    seen = []

    @fg.RegisterGradient("test_rewrite/record_maximum")
    def _record(op, grad):
        seen.append([np.shape(v) for v in op.inputs])
        return grad, 5.0 * jnp.ones_like(op.inputs[1])

    g = fg.gradient_override_map(
        lambda x: jnp.maximum(x, 0.0), {"max": "test_rewrite/record_maximum"}
    )
    np.testing.assert_array_equal(jax.grad(lambda x: g(x).sum())(X), [1.0, 1.0, 1.0])
    assert seen == [[(3,), ()]]


def test_multiple_outputs_give_a_tuple_of_cotangents() -> None:
    @fg.RegisterGradient("test_rewrite/sort_pair")
    def _sort_pair(op, grad):
        assert isinstance(grad, tuple) and len(grad) == 2
        return grad[1], grad[0]

    f = lambda x, y: lax.sort((x, y), num_keys=1)  # noqa: E731
    g = fg.gradient_override_map(f, {"sort": "test_rewrite/sort_pair"})
    y = jnp.array([10.0, 20.0, 30.0])
    np.testing.assert_array_equal(g(X, y)[1], f(X, y)[1])
    gx, gy = jax.grad(lambda x, y: (g(x, y)[1] * jnp.arange(3.0)).sum(), argnums=(0, 1))(X, y)
    np.testing.assert_array_equal(gx, [0.0, 1.0, 2.0])
    np.testing.assert_array_equal(gy, [0.0, 0.0, 0.0])


def test_integer_only_op_is_matched_but_not_wrapped() -> None:
    f = lambda i: jnp.abs(i)  # noqa: E731
    g = fg.gradient_override_map(f, {"Abs": "Identity"})
    i = jnp.array([-3, 4], jnp.int32)
    np.testing.assert_array_equal(g(i), [3, 4])
    assert [e.primitive.name for e in jax.make_jaxpr(g)(i).eqns] == ["abs"]


def test_structural_primitives_are_not_op_names() -> None:
    assert "scan" not in _jax.first_order_primitive_names()
    with pytest.raises(ValueError, match="unknown op 'scan'"):
        fg.gradient_override_map(jnp.sign, {"scan": "Identity"})


# --- custom_op and transparent ops ----------------------------------------------------------


def _cube_op(keep_outputs):
    # The backward reads the op's output: d(x**3) = 3 * y / x (away from 0).
    return _rewrite.custom_op(
        "cube",
        lambda x: (x**3,),
        lambda xs, outs, cts: [3.0 * outs[0] / xs[0] * cts[0]],
        keep_outputs=keep_outputs,
    )


@pytest.mark.parametrize("keep_outputs", [True, False])
def test_custom_op_outputs_differentiate_with_the_rule_again(keep_outputs) -> None:
    op = _cube_op(keep_outputs)
    f = lambda x: op(x)[0]  # noqa: E731
    x = jnp.float32(2.0)
    assert float(f(x)) == 8.0
    assert float(jax.grad(f)(x)) == 12.0
    # d/dx (3 y / x) with y' by the rule again: 3 (3 y / x) / x - 3 y / x**2 = 6 y / x**2.
    assert float(jax.grad(jax.grad(f))(x)) == 12.0
    assert float(jax.jit(jax.grad(jax.grad(jax.grad(f))))(x)) == 6.0


def _abs_transparently(x):
    eqn = jax.make_jaxpr(jnp.abs)(x).eqns[0]
    rule = lambda inputs, outputs, params, cts: [0.5 * cts[0]]  # noqa: E731
    return _rewrite.with_rule("half_abs", eqn, [x], rule, transparent=True)[0]


def test_transparent_ops_are_followed_only_when_asked() -> None:
    closed = _jax.trace(_abs_transparently, jnp.float32(-1.0))
    (eqn,) = closed.jaxpr.eqns
    assert eqn.primitive.name == "custom_vjp_call" and _rewrite.is_transparent(eqn)
    matches_abs = lambda e: e.primitive.name == "abs"  # noqa: E731
    neg = lambda e, invals: [-_jax.bind_equation(e, invals)[0]]  # noqa: E731
    blind = _rewrite.Rewriter(matches_abs, neg)
    seeing = _rewrite.Rewriter(matches_abs, neg, see_through=True)
    assert not blind.reaches(closed.jaxpr) and seeing.reaches(closed.jaxpr)
    assert float(seeing.closed(closed)(jnp.float32(-2.0))[0]) == -2.0
    assert float(blind.closed(closed)(jnp.float32(-2.0))[0]) == 2.0


def test_an_override_on_top_replaces_a_transparent_rule() -> None:
    assert float(jax.grad(_abs_transparently)(jnp.float32(-1.0))) == 0.5
    g = fg.gradient_override_map(_abs_transparently, {"Abs": "ReverseGradient"})
    assert float(jax.grad(g)(jnp.float32(-1.0))) == -1.0


@pytest.mark.parametrize(
    ("f", "name"),
    [
        pytest.param(jax.nn.selu, "selu", id="selu"),
        pytest.param(jax.nn.leaky_relu, "leaky_relu", id="leaky_relu"),
        pytest.param(jax.nn.soft_sign, "soft_sign", id="soft_sign"),
        pytest.param(lambda x: jnp.clip(x, 0.0, 1.0), "clip", id="clip"),
        pytest.param(lambda x: jax.scipy.special.xlogy(x, x), "xlogy", id="xlogy"),
        pytest.param(lambda x: jax.scipy.special.xlog1py(x, x), "xlog1py", id="xlog1py"),
    ],
)
def test_named_functions_answer_to_their_name(f, name) -> None:
    (eqn,) = jax.make_jaxpr(f)(jnp.ones(2)).jaxpr.eqns
    assert _rewrite.key(eqn) == name


def _equations(jaxpr):
    for eqn in jaxpr.eqns:
        yield eqn
        for inner in core.jaxprs_in_params(eqn.params):
            yield from _equations(inner)


def _sine_of_rows(table):
    return jnp.sum(jnp.sin(table[jnp.array([0, 2])]))


def test_re_emitted_equations_keep_the_line_that_wrote_them():
    # the rows of a table are read by gathers: fg.gradients re-emits the jaxpr itself
    jaxpr = jax.make_jaxpr(lambda t: fg.gradients(_sine_of_rows, t, indexed_slices=True))(
        jnp.ones((4, 3))
    )
    lines = {
        source_info_util.summarize(e.source_info)
        for e in _equations(jaxpr.jaxpr)
        if e.primitive.name in ("sin", "cos")
    }
    assert lines and all("test_rewrite.py" in line and "_sine_of_rows" in line for line in lines)
