"""fg.testing: compute_gradient's layout and formula, and check_gradients catching wrong rules."""

import tracemalloc

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import funcgrad as fg

X = jnp.array([0.5, -1.25, 2.0])
A = jnp.array([[0.5, -1.0, 2.0], [1.5, 0.25, -0.75]])


# --- compute_gradient ------------------------------------------------------------------


def test_layout_is_x_size_rows_by_y_size_columns():
    def f(a, x):
        return jnp.tanh(a @ x)

    (ta, na), (tx, nx) = fg.testing.compute_gradient(f, [A, X])
    assert ta.shape == na.shape == (6, 2) and tx.shape == nx.shape == (3, 2)
    assert ta.dtype == na.dtype == np.float32
    # Independently: jax.jacrev's Jacobian [y, x...], flattened and transposed.
    ja, jx = jax.jacrev(f, argnums=(0, 1))(A, X)
    np.testing.assert_allclose(ta, np.reshape(ja, (2, 6)).T, rtol=1e-6)
    np.testing.assert_allclose(tx, np.reshape(jx, (2, 3)).T, rtol=1e-6)
    np.testing.assert_allclose(na, ta, atol=2e-3)
    np.testing.assert_allclose(nx, tx, atol=2e-3)


def test_one_array_gives_one_pair():
    theoretical, numerical = fg.testing.compute_gradient(lambda x: x**2, X)
    np.testing.assert_allclose(theoretical, np.diag(2 * np.asarray(X)), rtol=1e-6)
    assert numerical.shape == (3, 3)


def test_numerical_is_tensorflows_formula_with_delta_1e_3_by_default():
    def f(x):
        return jnp.sin(x) * x

    _, numerical = fg.testing.compute_gradient(f, X)
    x = np.asarray(X)
    rows = []
    for i in range(3):
        pos, neg = x.copy(), x.copy()
        pos[i] += np.float32(1e-3)
        neg[i] -= np.float32(1e-3)
        rows.append((np.asarray(f(pos)) - np.asarray(f(neg))) / np.float32(2e-3))
    np.testing.assert_array_equal(numerical, np.stack(rows))
    _, coarse = fg.testing.compute_gradient(f, X, delta=0.25)
    assert np.abs(coarse - numerical).max() > 1e-3  # delta is used


def test_theoretical_is_funcgrads_own_gradient():
    @fg.custom_gradient
    def doubled_grad(x):
        return x * 1.0, lambda dy: 2.0 * dy

    theoretical, numerical = fg.testing.compute_gradient(doubled_grad, X)
    np.testing.assert_allclose(theoretical, 2 * np.eye(3))
    np.testing.assert_allclose(numerical, np.eye(3), atol=1e-3)


def test_unconnected_input_gives_zeros():
    (t0, n0), (t1, _) = fg.testing.compute_gradient(lambda a, b: a * 2.0, [X, X])
    np.testing.assert_array_equal(t1, np.zeros((3, 3)))
    np.testing.assert_allclose(t0, 2 * np.eye(3))
    np.testing.assert_allclose(n0, 2 * np.eye(3), atol=1e-3)


def test_float64_with_x64():
    with jax.enable_x64(True):
        x = np.array([0.5, 2.0])
        theoretical, numerical = fg.testing.compute_gradient(lambda v: v**3, x)
        assert theoretical.dtype == numerical.dtype == np.float64
        # central differences of x**3 err by exactly delta**2 = 1e-6
        np.testing.assert_allclose(numerical - theoretical, 1e-6 * np.eye(2), atol=1e-12)


# --- check_gradients: passes right rules, catches wrong ones --------------------------


@fg.custom_gradient
def cube(x):
    return x**3, lambda dy: dy * 3.0 * x**2


@fg.custom_gradient
def cube_wrong(x):
    return x**3, lambda dy: dy * 3.0 * x


@fg.custom_gradient
def cube_wrong_second(x):
    # Right first derivative, whose own derivative is lost: the second is zero, not 6x.
    return x**3, lambda dy: dy * 3.0 * jax.lax.stop_gradient(x) ** 2


@fg.RegisterGradient("TestingTanhRight")
def _tanh_right(op, grad):
    return grad * (1.0 - op.outputs[0] ** 2)


@fg.RegisterGradient("TestingTanhWrong")
def _tanh_wrong(op, grad):
    return grad * (1.0 - op.outputs[0])


def _relu_py_func(slope):
    """ReLU in NumPy, with a NumPy gradient ``slope`` where the input is positive."""

    def grad(op, dy):
        numpy_grad = lambda x, g: g * np.float32(slope) * (x > 0)  # noqa: E731
        return fg.py_func(numpy_grad, [op.inputs[0], dy], jnp.float32)

    return lambda x: fg.py_func(lambda a: np.maximum(a, 0.0), [x], jnp.float32, grad=grad)


relu_right = _relu_py_func(1.0)
relu_wrong = _relu_py_func(2.0)


@pytest.mark.parametrize(
    "f",
    [
        pytest.param(lambda x: jnp.sin(x) * x, id="plain"),
        pytest.param(cube, id="custom_gradient"),
        pytest.param(
            fg.gradient_override_map(jnp.tanh, {"Tanh": "TestingTanhRight"}), id="override"
        ),
        pytest.param(relu_right, id="py_func_numpy_grad"),
    ],
)
def test_right_rules_pass(f):
    fg.testing.check_gradients(f, X)


@pytest.mark.parametrize(
    ("f", "worst"),
    [
        pytest.param(
            cube_wrong,
            r"d ys\[1\] / d xs\[1\] \(rev\) is -3\.75, central differences give 4\.687",
            id="custom_gradient",
        ),
        pytest.param(
            fg.gradient_override_map(jnp.tanh, {"Tanh": "TestingTanhWrong"}),
            r"d ys\[1\] / d xs\[1\] \(rev\) is 1\.84",
            id="override",
        ),
        pytest.param(
            relu_wrong,
            r"d ys\[0\] / d xs\[0\] \(rev\) is 2, central differences give 1",
            id="py_func_numpy_grad",
        ),
    ],
)
def test_wrong_rules_are_caught(f, worst):
    with pytest.raises(AssertionError, match=r"fg\.testing\.check_gradients\(f, xs\): " + worst):
        fg.testing.check_gradients(f, X)


def test_wrong_second_derivative_is_caught_only_at_order_2():
    fg.testing.check_gradients(cube_wrong_second, X)
    fg.testing.check_gradients(cube, X, order=2)
    with pytest.raises(
        AssertionError,
        match=r"d² sum\(ys\) / d xs\[2\] d xs\[2\] \(rev over rev\) is 0, central differences "
        r"give 12: off by 12, more than atol \+ rtol \* \|numerical\| = 0\.064 \(3 of 9 "
        r"elements fail\)",
    ):
        fg.testing.check_gradients(cube_wrong_second, X, order=2)


def test_every_pair_of_modes_at_order_2():
    fg.testing.check_gradients(
        lambda x: jnp.sin(x) * jnp.sum(x**2), X, order=2, modes=("rev", "fwd")
    )


def test_forward_mode_checks_a_custom_jvp():
    @jax.custom_jvp
    def softplus(x):
        return jnp.log1p(jnp.exp(x))

    softplus.defjvp(lambda p, t: (softplus(p[0]), t[0] * jnp.exp(p[0])))  # not sigmoid
    for mode in ("fwd", "rev"):
        with pytest.raises(AssertionError, match=rf"\({mode}\) is"):
            fg.testing.check_gradients(softplus, X, modes=mode)


def test_forward_mode_refuses_a_custom_vjp():
    with pytest.raises(
        ValueError,
        match=r"modes has 'fwd', but f holds a jax\.custom_vjp .*; check it with "
        r"modes=\('rev',\)",
    ):
        fg.testing.check_gradients(cube, X, modes=("rev", "fwd"))


def test_every_failing_input_is_named_once_with_its_worst_element():
    def f(p):
        return {"s": cube_wrong(p["a"]) + p["n"].astype(jnp.float32), "t": relu_wrong(p["b"])}

    point = {"a": X, "b": jnp.array([[1.0, -2.0], [3.0, 0.5]]), "n": jnp.int32(1)}
    with pytest.raises(AssertionError) as caught:
        fg.testing.check_gradients(f, point)
    message = str(caught.value)
    assert message.count("(rev)") == 2
    assert "d ys['s'][1] / d xs['a'][1] (rev) is -3.75" in message
    # relu's wrong gradient is 2 instead of 1 wherever the input is positive; the worst
    # (the largest error over the tolerance) is the first of those, element [0, 0].
    assert "d ys['t'][0, 0] / d xs['b'][0, 0] (rev) is 2" in message
    assert "(3 of 28 elements fail)" in message


def test_tolerances_follow_the_dtype():
    def slightly_off(x):
        return fg.custom_gradient(lambda v: (v**2, lambda dy: dy * 2.0 * v * (1.0 + 1e-4)))(x)

    fg.testing.check_gradients(slightly_off, X)  # float32: within 4.9e-3
    with jax.enable_x64(True):
        x64 = np.asarray(X, np.float64)
        with pytest.raises(AssertionError, match=r"now eps=6\.06e-06, atol=6\.06e-06"):
            fg.testing.check_gradients(slightly_off, x64)
        fg.testing.check_gradients(lambda v: jnp.sin(v) * v, x64, order=2)
    with pytest.raises(AssertionError):
        fg.testing.check_gradients(slightly_off, X, rtol=1e-5, atol=1e-5, eps=1e-2)


# --- bad inputs ------------------------------------------------------------------------


def _traced_call(x):
    return fg.testing.check_gradients(jnp.sin, x)


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        pytest.param(
            lambda: fg.testing.compute_gradient(3, X),
            TypeError,
            r"fg\.testing\.compute_gradient\(f, xs, delta\): f must be a function, got int",
            id="compute_f_not_callable",
        ),
        pytest.param(
            lambda: fg.testing.compute_gradient(jnp.sin, [X, jnp.int32(1), {"a": X}]),
            TypeError,
            r"xs\[2\] is a dict; xs\[1\] has dtype int32; pass real floating arrays",
            id="compute_bad_inputs",
        ),
        pytest.param(
            lambda: fg.testing.compute_gradient(jnp.sin, jnp.ones(2, jnp.complex64)),
            TypeError,
            r"xs has dtype complex64",
            id="compute_complex",
        ),
        pytest.param(
            lambda: fg.testing.compute_gradient(lambda x: (x, 2 * x), X),
            TypeError,
            r"f must return one floating array, got the floating outputs \['ys\[0\]', "
            r"'ys\[1\]'\]; concatenate them",
            id="compute_two_outputs",
        ),
        pytest.param(
            lambda: fg.testing.compute_gradient(jnp.sin, X, delta=-1.0),
            ValueError,
            r"delta must be positive and finite, got -1\.0",
            id="compute_negative_delta",
        ),
        pytest.param(
            lambda: fg.testing.compute_gradient(jnp.sin, X, delta="1e-3"),
            TypeError,
            r"delta must be a number, got str",
            id="compute_delta_str",
        ),
        pytest.param(
            lambda: fg.testing.compute_gradient(jnp.sin, []),
            ValueError,
            r"xs is empty",
            id="compute_empty",
        ),
        pytest.param(
            lambda: jax.jit(_traced_call)(X),
            TypeError,
            r"xs holds traced values; .* call it outside jax\.jit and jax\.vmap",
            id="check_traced",
        ),
        pytest.param(
            lambda: fg.testing.check_gradients(lambda n: n * 2.0, jnp.int32(3)),
            ValueError,
            r"xs has no floating leaf \(dtypes \['int32'\]\)",
            id="check_no_floating_input",
        ),
        pytest.param(
            lambda: fg.testing.check_gradients(lambda x: x > 0, X),
            ValueError,
            r"f has no floating output",
            id="check_no_floating_output",
        ),
        pytest.param(
            lambda: fg.testing.check_gradients(jnp.sin, jnp.ones(2, jnp.complex64)),
            TypeError,
            r"xs is complex64; pass the real and imaginary parts as separate real inputs",
            id="check_complex",
        ),
    ],
)
def test_bad_inputs(call, error, match):
    with pytest.raises(error, match=match):
        call()


@pytest.mark.parametrize(
    ("options", "error", "match"),
    [
        pytest.param(
            dict(order=3, modes=("rev", "reverse")),
            ValueError,
            r"modes has 'reverse'; order is 3, and only 1 and 2 are checked; pass order=1 or 2",
            id="check_order_and_mode",
        ),
        pytest.param(
            dict(modes=("fdw",)),
            ValueError,
            r"modes has 'fdw' \(did you mean 'fwd'\?\)",
            id="check_mode_typo",
        ),
        pytest.param(dict(modes=()), ValueError, r"modes is empty", id="check_modes_empty"),
        pytest.param(
            dict(modes=1),
            TypeError,
            r"modes must be a string or a sequence of strings, got int",
            id="check_modes_type",
        ),
        pytest.param(
            dict(order=1.0),
            TypeError,
            r"order must be an integer >= 1, got 1\.0",
            id="check_order_type",
        ),
        pytest.param(
            dict(atol=float("nan")),
            ValueError,
            r"atol must be positive and finite, got nan",
            id="check_atol_nan",
        ),
        pytest.param(
            dict(eps=0), ValueError, r"eps must be positive and finite, got 0", id="check_eps_zero"
        ),
    ],
)
def test_bad_options(options, error, match):
    with pytest.raises(error, match=r"fg\.testing\.check_gradients\(f, xs\): " + match):
        fg.testing.check_gradients(jnp.sin, X, **options)


# --- compare_tf_checkpoint ---------------------------------------------------------------

_GAN = {"D": jnp.array([0.5, -1.0]), "G": jnp.array([[1.0, 2.0], [0.5, -0.5]])}


def _gan_loss(p):
    return jnp.sum(jnp.tanh(p["G"] @ p["D"]) ** 2)


def _gan_group():
    return fg.train.OptimizerGroup(
        D=(fg.train.AdamOptimizer(0.1), ["D"]), G=(fg.train.AdamOptimizer(0.05), ["G"])
    )


def _gan_steps(group, state, steps):
    for _ in range(steps):
        state = group["D"].minimize(_gan_loss, state)[0]
        state = group["G"].minimize(lambda p: -_gan_loss(p), state)[0]
    return state


def test_compare_tf_checkpoint_passes_a_right_port(tmp_path):
    group = _gan_group()
    state = _gan_steps(group, group.init(_GAN), 3)
    prefix = fg.train.save_tf_checkpoint(str(tmp_path / "m"), state, group)
    report = fg.testing.compare_tf_checkpoint(prefix, state, group)
    assert set(report) == {
        "D", "D/Adam", "D/Adam_1", "G", "G/Adam", "G/Adam_1", "beta1_power", "beta2_power",
        "beta1_power_1", "beta2_power_1", "global_step",
    }  # fmt: skip
    assert all(difference == 0.0 for difference in report.values())


def test_compare_tf_checkpoint_catches_one_slot_off_by_one_step(tmp_path):
    group = _gan_group()
    state = _gan_steps(group, group.init(_GAN), 3)
    prefix = fg.train.save_tf_checkpoint(str(tmp_path / "m"), state, group)
    ahead = _gan_steps(group, state, 1)
    g = state.opt_state["G"]
    moment = g.inner_state[0]._replace(mu=ahead.opt_state["G"].inner_state[0].mu)
    wrong = state._replace(opt_state={**state.opt_state, "G": g._replace(
        inner_state=(moment, *g.inner_state[1:]))})  # fmt: skip
    with pytest.raises(
        AssertionError,
        match=r"1 of 11 values differ beyond .*the worst, 'G/Adam'\[\d, \d\] \(funcgrad's "
        r"'G/Adam'\) is .* here and .* in the checkpoint.*compare after one step",
    ):
        fg.testing.compare_tf_checkpoint(prefix, wrong, group)
    # The step count alone off by one: Adam's beta powers (which hold it) say so.
    powers = ahead.opt_state["G"].inner_state[0]
    count = g.inner_state[0]._replace(
        beta1_power=powers.beta1_power, beta2_power=powers.beta2_power
    )
    wrong = state._replace(opt_state={**state.opt_state, "G": g._replace(
        inner_state=(count, *g.inner_state[1:]))})  # fmt: skip
    with pytest.raises(AssertionError, match=r"2 of 11 .*'beta\d_power_1'"):
        fg.testing.compare_tf_checkpoint(prefix, wrong, group)


INF, NAN = float("inf"), float("nan")


def _saved_w(tmp_path, w, extras=None):
    """A checkpoint of ``{"W": w}`` (float32) and its optimizer."""
    opt = fg.train.GradientDescentOptimizer(0.1)
    state = opt.init({"W": jnp.asarray(w, jnp.float32)})
    return opt, fg.train.save_tf_checkpoint(str(tmp_path / "m"), state, opt, extras=extras)


def _w(opt, w):
    return opt.init({"W": jnp.asarray(w, jnp.float32)})


@pytest.mark.parametrize(
    ("theirs", "ours", "shown"),
    [
        pytest.param([1.0, INF], [1.0, 3e38], "3e\\+38 here and inf", id="inf_against_3e38"),
        pytest.param([1.0, INF], [1.0, -INF], "-inf here and inf", id="inf_against_minus_inf"),
        pytest.param([1.0, 3e38], [1.0, INF], "inf here and 3e\\+38", id="3e38_against_inf"),
        pytest.param([1.0, NAN], [1.0, 0.0], "0 here and nan", id="nan_against_0"),
        pytest.param([1.0, 0.0], [1.0, NAN], "nan here and 0", id="0_against_nan"),
        pytest.param([1.0, NAN], [1.0, INF], "inf here and nan", id="nan_against_inf"),
    ],
)
def test_compare_tf_checkpoint_inf_and_nan_only_against_the_same(tmp_path, theirs, ours, shown):
    opt, prefix = _saved_w(tmp_path, theirs)
    with pytest.raises(
        AssertionError, match=r"inf and NaN only where the same\); the worst, 'W'\[1\] "
        rf"\(funcgrad's 'W'\) is {shown} in the checkpoint, off by inf \(1 of 2 elements\)",
    ):  # fmt: skip
        fg.testing.compare_tf_checkpoint(prefix, _w(opt, ours), opt, atol=1e30)


def test_compare_tf_checkpoint_passes_the_same_inf_and_nan(tmp_path):
    """The same inf or NaN at one place is equal; the tolerance comes from the finite
    values alone."""
    opt, prefix = _saved_w(tmp_path, [INF, -INF, NAN, 1.0])
    report = fg.testing.compare_tf_checkpoint(prefix, _w(opt, [INF, -INF, NAN, 1.0]), opt)
    assert report["W"] == 0.0
    near = _w(opt, [INF, -INF, NAN, 1.000001])
    assert 0 < fg.testing.compare_tf_checkpoint(prefix, near, opt)["W"] < 1e-5
    with pytest.raises(AssertionError, match=r"'W'\[3\] .* is 1.001 here and 1 in the"):
        fg.testing.compare_tf_checkpoint(prefix, _w(opt, [INF, -INF, NAN, 1.001]), opt)


@pytest.mark.parametrize(
    ("saved", "given", "shown"),
    [
        pytest.param(np.int64(10**6), np.int64(10**6 + 5), "1000005 here and 1000000", id="int64"),
        pytest.param(
            np.int64(2**62), np.int64(2**62 + 1), f"{2**62 + 1} here and {2**62}", id="2**62"
        ),
        pytest.param(np.int32(7), np.int32(-7), "-7 here and 7", id="int32"),
        pytest.param(np.uint8(255), np.uint8(254), "254 here and 255", id="uint8"),
        pytest.param(np.True_, np.False_, "False here and True", id="bool"),
    ],
)
def test_compare_tf_checkpoint_integers_and_booleans_exactly(tmp_path, saved, given, shown):
    opt, prefix = _saved_w(tmp_path, [1.0], extras={"n": saved})
    assert fg.testing.compare_tf_checkpoint(prefix, _w(opt, [1.0]), opt, extras={"n": saved})
    with pytest.raises(
        AssertionError, match=rf"the worst, 'n' \(funcgrad's 'n'\) is {shown} in the checkpoint"
    ):
        fg.testing.compare_tf_checkpoint(
            prefix, _w(opt, [1.0]), opt, extras={"n": given}, rtol=1e-3, atol=1e3
        )


def test_compare_tf_checkpoint_bad_input(tmp_path):
    opt = fg.train.GradientDescentOptimizer(0.1)
    state = opt.init({"W": jnp.ones(2)})
    prefix = fg.train.save_tf_checkpoint(str(tmp_path / "m"), state, opt)
    with pytest.raises(ValueError, match=r"rtol must be positive and finite, got 0; pass e.g."):
        fg.testing.compare_tf_checkpoint(prefix, state, opt, rtol=0)
    with pytest.raises(TypeError, match=r"atol must be a number, got str"):
        fg.testing.compare_tf_checkpoint(prefix, state, opt, atol="1e-6")
    with pytest.raises(ValueError, match=r"lacks 'V'.*map the names with name_map"):
        fg.testing.compare_tf_checkpoint(
            prefix, opt.init({"W": jnp.ones(2), "V": jnp.ones(1)}), opt
        )


# --- large inputs: bounded memory ------------------------------------------------------

BIG = jnp.linspace(-2.0, 2.0, 10_000)


def _peak_mib(call):
    """The peak of Python-tracked allocations (NumPy arrays included) during ``call``."""
    tracemalloc.start()
    try:
        call()
        return tracemalloc.get_traced_memory()[1] / 2**20
    finally:
        tracemalloc.stop()


def test_a_10000_element_input_is_checked_in_bounded_memory():
    # The whole Jacobian would be 10^8 float64 elements: 763 MiB for the differences alone.
    peak = _peak_mib(
        lambda: fg.testing.check_gradients(
            lambda x: jnp.tanh(x) * x**2, BIG, order=2, modes=("rev",)
        )
    )
    assert peak < 64
    assert _peak_mib(lambda: fg.testing.check_gradients(jnp.sin, BIG, modes=("fwd",))) < 64


@pytest.mark.parametrize("modes", [("rev",), ("fwd",)])
def test_a_large_dense_jacobian_is_sampled_and_still_right(modes):
    w = jnp.asarray(np.random.default_rng(1).normal(size=(100, 3000)) / 50, jnp.float32)
    fg.testing.check_gradients(lambda w, v: jnp.tanh(w @ v), [w, BIG[:3000]], modes=modes)


def test_a_rule_wrong_everywhere_is_caught_in_a_large_input():
    @fg.custom_gradient
    def sin(x):
        return jnp.sin(x), lambda dy: dy * jnp.cos(x) * 1.05

    with pytest.raises(
        AssertionError,
        match=r"d ys\[\d+\] / d xs\[\d+\] \(rev\) .* of 512 elements fail, sampled in 16 "
        r"random rows: 10000 x 10000 are too many to check all\); a derivative rule",
    ):
        fg.testing.check_gradients(sin, BIG)


def test_a_wrong_second_derivative_is_caught_in_a_large_input():
    @fg.custom_gradient
    def cube(x):
        return x**3, lambda dy: dy * 3.0 * jax.lax.stop_gradient(x) ** 2

    with pytest.raises(AssertionError, match=r"\(rev over rev\).*sampled in 16 random rows"):
        fg.testing.check_gradients(cube, BIG, order=2)


def test_compute_gradient_refuses_a_jacobian_too_large_to_hold():
    def refused():
        with pytest.raises(
            ValueError,
            match=r"xs's Jacobian would be 10000 x 10000 = 100,000,000 elements \(763 MiB "
            r"for the two\), over the 16,777,216 elements.*fg\.testing\.check_gradients\(f, "
            r"xs\), which checks a large input's Jacobian at random rows",
        ):
            fg.testing.compute_gradient(jnp.sin, BIG)

    assert _peak_mib(refused) < 16  # refused before anything of that size is built


def test_second_order_forward_mode_refuses_a_large_input():
    with pytest.raises(
        ValueError,
        match=r"order=2 with 'fwd' builds the gradient with jax\.jacfwd.*100,000,000 elements.*"
        r"modes=\('rev',\)",
    ):
        fg.testing.check_gradients(jnp.sin, BIG, order=2, modes=("rev", "fwd"))
