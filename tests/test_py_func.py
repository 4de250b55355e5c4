"""Tests for ``fg.py_func``: values, transformations, gradients, state and errors."""

import gc
import os
import threading
import weakref

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import funcgrad as fg

X = jnp.array([-3.0, -4.0, 1.0, 40.0])


def _clip(x: np.ndarray) -> np.ndarray:
    return np.clip(x, -3, 3)


def _clip_grad_numpy(x: np.ndarray, dy: np.ndarray) -> np.ndarray:
    return (dy * ((x >= -3) & (x <= 3))).astype(np.float32)


def _clip_grad(op, dy):
    return fg.py_func(_clip_grad_numpy, [op.inputs[0], dy], jnp.float32)


def clipped_relu(x: jax.Array) -> jax.Array:
    return fg.py_func(_clip, [x], jnp.float32, grad=_clip_grad, name="clipped_relu")


def _sin(x: jax.Array) -> jax.Array:
    """sin on the host, with a differentiable JAX gradient."""
    return fg.py_func(np.sin, [x], jnp.float32, grad=lambda op, dy: dy * jnp.cos(op.inputs[0]))


def _closed_form_clip_grad(x: jax.Array) -> jax.Array:
    return ((x >= -3) & (x <= 3)).astype(jnp.float32)


# --- the tutorial example and plain values------------------------------------------------


@pytest.mark.parametrize("transform", [jax.jit, lambda f: f], ids=["jit", "eager"])
def test_tutorial_clipped_relu_values_and_gradients(transform):
    values = transform(clipped_relu)(X)
    grads = transform(lambda x: fg.gradients(clipped_relu, x))(X)
    assert values.tolist() == [-3.0, -3.0, 1.0, 3.0]
    assert grads.tolist() == [1.0, 0.0, 1.0, 0.0]


def test_gradient_matches_finite_differences_away_from_kinks():
    x = jnp.array([-5.0, -1.5, 0.25, 2.5, 7.0])
    jax.test_util.check_grads(clipped_relu, (x,), order=1, modes=["rev"])
    chex.assert_trees_all_close(
        jax.grad(lambda x: clipped_relu(x).sum())(x), jnp.array([0, 1, 1, 1, 0.0])
    )


def test_jit_traces_once_and_matches_numpy():
    @jax.jit
    @chex.assert_max_traces(n=1)
    def f(x):
        return clipped_relu(x) * 2.0

    for x in (X, X + 1.0):
        np.testing.assert_array_equal(f(x), 2 * np.clip(np.asarray(x), -3, 3))


def test_jax_grad_and_fg_gradients_agree_with_closed_form():
    x = jnp.array([-3.5, -3.0, 0.0, 3.0, 3.5])
    expected = _closed_form_clip_grad(x)
    chex.assert_trees_all_equal(jax.grad(lambda x: clipped_relu(x).sum())(x), expected)
    chex.assert_trees_all_equal(fg.gradients(clipped_relu, x), expected)
    chex.assert_trees_all_equal(jax.jit(lambda x: fg.gradients(clipped_relu, x))(x), expected)


# --- vmap --------------------------------------------------------------------------------


def _counting(shapes: list, fn):
    def host(*args):
        shapes.append(tuple(a.shape for a in args))
        return fn(*args)

    return host


@pytest.mark.parametrize("vectorized", [False, True], ids=["per_example", "vectorized"])
def test_vmap_equals_python_loop(vectorized):
    xs = jnp.arange(12.0, dtype=jnp.float32).reshape(3, 4) - 6.0
    w = jnp.array([1.0, 2.0, 3.0, 4.0])
    seen: list = []
    host = _counting(seen, lambda x, w: (x * w).astype(np.float32))
    f = lambda x, w: fg.py_func(host, [x, w], jnp.float32, vectorized=vectorized)  # noqa: E731
    batched = jax.jit(jax.vmap(f, in_axes=(0, None)))(xs, w)
    expected = jnp.stack([f(x, w) for x in xs])
    chex.assert_trees_all_equal(batched, expected)
    calls = seen[: len(seen) - len(xs)]  # the batched run comes first, then the loop
    assert calls == ([((3, 4), (3, 4))] if vectorized else [((4,), (4,))] * 3)


def test_vmap_nested_vectorized_sees_both_batch_axes():
    seen: list = []
    host = _counting(seen, lambda x: (2 * x).astype(np.float32))
    f = lambda x: fg.py_func(host, [x], jnp.float32, vectorized=True)  # noqa: E731
    out = jax.vmap(jax.vmap(f))(jnp.ones((2, 3, 4)))
    chex.assert_trees_all_equal(out, 2 * jnp.ones((2, 3, 4)))
    assert seen == [((2, 3, 4),)]


@pytest.mark.parametrize("vectorized", [False, True], ids=["per_example", "vectorized"])
def test_vmap_of_gradient_equals_python_loop(vectorized):
    xs = jnp.array([[-4.0, 0.5, 2.0], [1.0, 5.0, -2.0]])

    def f(x):
        return fg.py_func(np.sin, [x], jnp.float32, vectorized=vectorized, grad=_sin_grad)

    grad = jax.grad(lambda x: f(x).sum())
    chex.assert_trees_all_close(jax.vmap(grad)(xs), jnp.stack([grad(x) for x in xs]))
    chex.assert_trees_all_close(jax.vmap(grad)(xs), jnp.cos(xs), rtol=1e-6)


def _sin_grad(op, dy):
    return fg.py_func(lambda x, dy: (np.cos(x) * dy).astype(np.float32), (*op.inputs, dy), dy.dtype)


# --- higher order ------------------------------------------------------------------------


def test_second_order_with_differentiable_grad():
    x = jnp.array([0.3, -1.2, 2.0])
    second = jax.grad(lambda x: jax.grad(lambda x: _sin(x).sum())(x).sum())(x)
    chex.assert_trees_all_close(second, -jnp.sin(x), rtol=1e-6)
    nested = fg.gradients(lambda x: fg.gradients(lambda x: _sin(x).sum(), x), x)
    chex.assert_trees_all_close(nested, -jnp.sin(x), rtol=1e-6)
    hessian = jax.jacrev(jax.jacrev(lambda x: _sin(x).sum()))(x)
    chex.assert_trees_all_close(hessian, jnp.diag(-jnp.sin(x)), rtol=1e-6)
    with pytest.raises(TypeError, match=r"forward-mode differentiation .* use jax.jacrev"):
        jax.hessian(lambda x: _sin(x).sum())(x)


def test_numpy_gradient_differentiated_again_raises_naming_it():
    inner_grad = lambda op, dy: fg.py_func(  # noqa: E731
        _clip_grad_numpy, [op.inputs[0], dy], jnp.float32, name="clip_grad"
    )
    f = lambda x: fg.py_func(_clip, [x], jnp.float32, grad=inner_grad).sum()  # noqa: E731
    with pytest.raises(LookupError, match=r"name='clip_grad'.*pass grad="):
        jax.grad(lambda x: jax.grad(f)(x).sum())(X)
    assert fg.gradients(lambda x: fg.gradients(f, x), X) is None  # a cut, as in TensorFlow


# --- without grad: a cut for fg.gradients, an error for jax.grad -------------------------


def _no_grad(x):
    return fg.py_func(_clip, [x], jnp.float32, name="clip_only")


def test_without_grad_fg_gradients_treats_it_as_a_cut():
    assert fg.gradients(_no_grad, X) is None
    chex.assert_trees_all_equal(
        fg.gradients(_no_grad, X, unconnected_gradients="zero"), jnp.zeros(4)
    )
    chex.assert_trees_all_equal(fg.gradients(lambda x: _no_grad(x) + 2.0 * x, X), 2.0 * jnp.ones(4))


def test_without_grad_jax_grad_raises_only_when_differentiating_through_it():
    with pytest.raises(LookupError, match=r"fg.py_func\(name='clip_only'.*pass grad=fn\(op, dy\)"):
        jax.grad(lambda x: _no_grad(x).sum())(X)
    unused = lambda x: (_no_grad(x), x.sum())[1]  # noqa: E731
    chex.assert_trees_all_equal(jax.grad(unused)(X), jnp.ones(4))
    held = lambda x: (_no_grad(fg.stop_gradient(x)) * x).sum()  # noqa: E731
    chex.assert_trees_all_equal(jax.grad(held)(X), jnp.clip(X, -3, 3))


@pytest.mark.parametrize("variant", [jax.jit, lambda f: f], ids=["with_jit", "without_jit"])
def test_without_grad_jax_grad_raises_the_same_inside_fg_gradients(variant):
    # Whether an op is a cut is decided from the equation alone: jax.grad through it
    # raises the same error when fg.gradients is tracing as when it is not.
    through = lambda x: _no_grad(x).sum()  # noqa: E731
    with pytest.raises(LookupError) as outside:
        variant(jax.grad(through))(X)
    with pytest.raises(LookupError) as inside:
        fg.gradients(lambda x: variant(jax.grad(through))(x).sum(), X)
    assert str(inside.value).splitlines()[0] == str(outside.value).splitlines()[0]
    assert "name='clip_only'" in str(inside.value)


def test_without_grad_is_a_cut_inside_jit_scan_and_cond():
    def f(x):
        y = jax.jit(_no_grad)(x)
        y, _ = jax.lax.scan(lambda c, _: (c + _no_grad(c), None), y, None, length=2)
        return jax.lax.cond(True, _no_grad, lambda v: v, y)

    assert fg.gradients(lambda x: f(x).sum(), X) is None
    both = fg.gradients(lambda x: (f(x) + 3.0 * x).sum(), X)
    chex.assert_trees_all_equal(both, 3.0 * jnp.ones(4))


# --- Tout and several inputs and outputs -------------------------------------------------


@pytest.mark.parametrize(
    ("tout", "expected_shape"),
    [
        pytest.param(jnp.float32, (2, 3), id="dtype"),
        pytest.param(np.dtype("float32"), (2, 3), id="numpy_dtype"),
        pytest.param(jax.ShapeDtypeStruct((2, 3), jnp.float32), (2, 3), id="shape_dtype_struct"),
    ],
)
def test_tout_single(tout, expected_shape):
    x = jnp.ones((2, 3))
    out = jax.jit(lambda x: fg.py_func(lambda a: a + 1, [x], tout))(x)
    assert isinstance(out, jax.Array)
    chex.assert_trees_all_equal(out, 2 * jnp.ones(expected_shape))


@pytest.mark.parametrize("container", [list, tuple], ids=["list", "tuple"])
def test_tout_list_gives_a_list_with_shapes_and_dtypes(container):
    x = jnp.arange(6.0, dtype=jnp.float32).reshape(2, 3)
    tout = container([jnp.float32, jax.ShapeDtypeStruct((), jnp.int32)])
    host = lambda a: [a * 2, np.int32(a.size)]  # noqa: E731
    out = jax.jit(lambda x: fg.py_func(host, [x], tout))(x)
    assert isinstance(out, list) and len(out) == 2
    chex.assert_trees_all_equal(out, [2 * x, jnp.int32(6)])


def test_tout_list_of_one_gives_a_list():
    out = fg.py_func(lambda a: a, [X], [jnp.float32])
    assert isinstance(out, list)
    chex.assert_trees_all_equal(out, [X])


def test_no_inputs_with_shape_dtype_struct():
    out = fg.py_func(
        lambda: np.arange(3, dtype=np.int32), [], jax.ShapeDtypeStruct((3,), jnp.int32)
    )
    chex.assert_trees_all_equal(out, jnp.arange(3, dtype=jnp.int32))


def test_multiple_inputs_and_outputs_with_gradient():
    def host(a, b):
        return [np.sin(a) * b, (a * b).sum(dtype=np.float32)]

    def grad(op, dys):
        a, b = op.inputs
        dsin, dsum = dys
        return [dsin * jnp.cos(a) * b + dsum * b, dsin * jnp.sin(a) + dsum * a]

    tout = [jnp.float32, jax.ShapeDtypeStruct((), jnp.float32)]

    def f(a, b):
        y, s = fg.py_func(host, [a, b], tout, grad=grad)
        return (y * 3.0).sum() + 2.0 * s

    def closed(a, b):
        return (jnp.sin(a) * b * 3.0).sum() + 2.0 * (a * b).sum()

    a, b = jnp.array([0.1, 0.7, -1.0]), jnp.array([2.0, -1.0, 0.5])
    chex.assert_trees_all_close(f(a, b), closed(a, b), rtol=1e-6)
    chex.assert_trees_all_close(fg.gradients(f, [a, b]), fg.gradients(closed, [a, b]), rtol=1e-6)


def test_grad_sees_the_op_and_integer_inputs_get_no_gradient():
    seen = {}

    def grad(op, dy):
        seen.update(type=op.type, n_in=len(op.inputs), n_out=len(op.outputs), params=op.params)
        return [dy * op.inputs[1].astype(jnp.float32), None]

    def f(x, n):
        return fg.py_func(
            lambda x, n: (x * n).astype(np.float32), [x, n], jnp.float32, grad=grad, name="scale"
        )

    n = jnp.int32(3)
    assert fg.gradients(f, [X, n]) == [pytest.approx(np.full(4, 3.0)), None]
    chex.assert_trees_all_equal(jax.grad(lambda x: f(x, n).sum())(X), jnp.full(4, 3.0))
    assert seen["type"] == "PyFunc" and (seen["n_in"], seen["n_out"]) == (2, 1)
    assert seen["params"]["name"] == "scale" and seen["params"]["stateful"] is False


# --- stateful ----------------------------------------------------------------------------


def test_stateful_keeps_call_count_and_order():
    log: list = []

    def record(tag):
        def host(x):
            log.append((tag, float(x)))
            return x

        return host

    @jax.jit
    def f(x):
        for tag in "abc":  # outputs unused: the calls still run, in program order
            fg.py_func(record(tag), [x], jnp.float32, stateful=True)
        return x

    f(jnp.float32(1.0))
    f(jnp.float32(2.0))
    assert log == [("a", 1.0), ("b", 1.0), ("c", 1.0), ("a", 2.0), ("b", 2.0), ("c", 2.0)]


def test_stateful_inside_scan_runs_every_step_in_order():
    log: list = []

    def host(x):
        log.append(float(x))
        return x + np.float32(1)

    step = lambda c, _: (fg.py_func(host, [c], jnp.float32, stateful=True), None)  # noqa: E731
    out, _ = jax.jit(lambda x: jax.lax.scan(step, x, None, length=4))(jnp.float32(0.0))
    assert float(out) == 4.0 and log == [0.0, 1.0, 2.0, 3.0]


@pytest.mark.parametrize(
    "wrap",
    [
        pytest.param(lambda f: f, id="direct"),
        pytest.param(
            lambda f: lambda x: jax.lax.scan(lambda c, _: (f(c), None), x, None, 2)[0], id="in_scan"
        ),
    ],
)
def test_stateful_vmap_is_a_clear_error(wrap):
    f = lambda x: fg.py_func(lambda a: a, [x], jnp.float32, stateful=True, name="log")  # noqa: E731
    with pytest.raises(ValueError, match=r"name='log'.*stateful py_func cannot be vmapped"):
        jax.vmap(wrap(f))(jnp.ones((2, 3)))


def test_stateful_with_gradient():
    def f(x):
        grad = lambda op, dy: dy * jnp.cos(op.inputs[0])  # noqa: E731
        return fg.py_func(np.sin, [x], jnp.float32, stateful=True, grad=grad)

    chex.assert_trees_all_close(jax.jit(jax.grad(lambda x: f(x).sum()))(X), jnp.cos(X), rtol=1e-6)


# --- control flow ------------------------------------------------------------------------


def test_inside_scan_value_and_gradient():
    def loop(x):
        return jax.lax.scan(lambda c, _: (clipped_relu(c * 2.0), None), x, None, length=2)[0]

    x = jnp.array([-2.0, 0.5, 1.0])
    closed = lambda x: jnp.clip(jnp.clip(2 * x, -3, 3) * 2, -3, 3)  # noqa: E731
    chex.assert_trees_all_equal(jax.jit(loop)(x), closed(x))
    chex.assert_trees_all_equal(
        jax.jit(jax.grad(lambda x: loop(x).sum()))(x), jnp.array([0.0, 4.0, 0.0])
    )


def test_inside_cond_value_and_gradient():
    def f(x, flag):
        return jax.lax.cond(flag, clipped_relu, lambda x: -x, x)

    g = jax.jit(jax.grad(lambda x, flag: f(x, flag).sum()))
    chex.assert_trees_all_equal(jax.jit(f)(X, True), jnp.clip(X, -3, 3))
    chex.assert_trees_all_equal(jax.jit(f)(X, False), -X)
    chex.assert_trees_all_equal(g(X, True), _closed_form_clip_grad(X))
    chex.assert_trees_all_equal(g(X, False), -jnp.ones(4))


# --- errors on the host ------------------------------------------------------------------


def _boom(x):
    raise ValueError(f"boom at {x.size}")


def test_exception_in_func_outside_jit_is_a_py_func_error_and_next_call_works():
    with pytest.raises(
        fg.PyFuncError, match=r"name='boomer'.*func raised ValueError: boom at 4"
    ) as info:
        fg.py_func(_boom, [X], jnp.float32, name="boomer")
    assert (info.value.type_name, info.value.message) == ("ValueError", "boom at 4")
    assert "_boom" in info.value.traceback_text and "raise ValueError" in info.value.traceback_text
    chex.assert_trees_all_equal(clipped_relu(X), jnp.clip(X, -3, 3))


def test_host_errors_are_not_logged_twice(caplog):
    with pytest.raises(fg.PyFuncError):
        fg.py_func(_boom, [X], jnp.float32)
    assert not [r for r in caplog.records if r.name.startswith("jax")]


@pytest.mark.parametrize(
    "wrap",
    [
        pytest.param(lambda f: f, id="jit"),
        pytest.param(jax.vmap, id="vmap"),
        pytest.param(
            lambda f: lambda x: jax.lax.scan(lambda c, _: (f(c), None), x, None, 2)[0], id="scan"
        ),
    ],
)
def test_exception_in_func_under_jit_carries_type_message_and_traceback(wrap):
    f = lambda x: fg.py_func(_boom, [x], jnp.float32, name="boomer")  # noqa: E731
    with pytest.raises(
        jax.errors.JaxRuntimeError,
        match=r"(?s)name='boomer'.*func raised ValueError: boom at.*Original traceback.*in _boom",
    ):
        jax.jit(wrap(f))(jnp.ones((2, 4))).block_until_ready()
    chex.assert_trees_all_equal(jax.jit(clipped_relu)(X), jnp.clip(X, -3, 3))


def test_exception_in_stateful_func_and_next_call_works():
    with pytest.raises(jax.errors.JaxRuntimeError, match="func raised ValueError: boom at 4"):
        jax.jit(lambda x: fg.py_func(_boom, [x], jnp.float32, stateful=True))(X).block_until_ready()
    with pytest.raises(fg.PyFuncError, match="func raised ValueError: boom at 4"):
        fg.py_func(_boom, [X], jnp.float32, stateful=True)
    assert fg.py_func(lambda x: x, [X], jnp.float32, stateful=True).tolist() == X.tolist()


def test_exception_in_numpy_gradient():
    def bad_grad(op, dy):
        return fg.py_func(lambda x, dy: _boom(x), [op.inputs[0], dy], jnp.float32, name="bad_grad")

    f = lambda x: fg.py_func(_clip, [x], jnp.float32, grad=bad_grad).sum()  # noqa: E731
    with pytest.raises(fg.PyFuncError, match=r"name='bad_grad'.*ValueError: boom at 4"):
        jax.grad(f)(X)
    with pytest.raises(jax.errors.JaxRuntimeError, match=r"name='bad_grad'.*ValueError: boom"):
        jax.jit(jax.grad(f))(X).block_until_ready()
    chex.assert_trees_all_equal(
        jax.grad(lambda x: clipped_relu(x).sum())(X), jnp.array([1.0, 0, 1, 0])
    )


@pytest.mark.parametrize(
    ("host", "tout", "match"),
    [
        pytest.param(
            lambda x: x.astype(np.float64),
            jnp.float32,
            r"output 0: Tout says shape \(4,\) dtype float32, func returned shape \(4,\) "
            "dtype float64",
            id="wrong_dtype",
        ),
        pytest.param(
            lambda x: x[:2],
            jnp.float32,
            r"output 0: Tout says shape \(4,\) dtype float32, func returned shape \(2,\) "
            "dtype float32",
            id="wrong_shape",
        ),
        pytest.param(
            lambda x: 1.0,
            jax.ShapeDtypeStruct((), jnp.float32),
            r"Tout says shape \(\) dtype float32, func returned shape \(\) dtype float64",
            id="python_float",
        ),
        pytest.param(
            lambda x: [x, x, x],
            [jnp.float32, jnp.float32],
            r"func returned 3 outputs, but Tout lists 2",
            id="wrong_count",
        ),
    ],
)
def test_output_unlike_tout_is_an_error_naming_both(host, tout, match):
    with pytest.raises(fg.PyFuncError, match=match):
        fg.py_func(host, [X], tout)
    with pytest.raises(jax.errors.JaxRuntimeError, match=match):
        jax.jit(lambda x: fg.py_func(host, [x], tout))(X).block_until_ready()


def test_vectorized_output_without_batch_axis_is_an_error():
    f = lambda x: fg.py_func(lambda a: a[0], [x], jnp.float32, vectorized=True)  # noqa: E731
    with pytest.raises(jax.errors.JaxRuntimeError, match=r"Tout says shape \(2, 4\).*shape \(4,\)"):
        jax.jit(jax.vmap(f))(jnp.ones((2, 4))).block_until_ready()


# --- errors at the call -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        pytest.param(
            {"inp": X},
            TypeError,
            r"inp must be a list of arrays.*wrap a single input as \[x\]",
            id="inp_not_list",
        ),
        pytest.param(
            {"inp": [{"a": X}]}, TypeError, r"inp\[0\] is a dict", id="inp_element_not_array"
        ),
        pytest.param(
            {"Tout": "not a dtype"},
            TypeError,
            r"Tout is 'not a dtype'; pass a dtype",
            id="bad_tout",
        ),
        pytest.param(
            {"Tout": [jnp.float32, object()]},
            TypeError,
            r"Tout\[1\] is <object",
            id="bad_tout_entry",
        ),
        pytest.param(
            {"inp": []},
            ValueError,
            r"Tout is the dtype float32.*inp is empty; pass jax.ShapeDtypeStruct",
            id="dtype_tout_no_inputs",
        ),
        pytest.param(
            {"stateful": True, "vectorized": True},
            ValueError,
            r"stateful=True and vectorized=True",
            id="stateful_vectorized",
        ),
    ],
)
def test_bad_arguments(kwargs, error, match):
    args = {"func": _clip, "inp": [X], "Tout": jnp.float32, **kwargs}
    with pytest.raises(error, match=r"fg\.py_func\(_clip, inp, Tout\): " + match):
        fg.py_func(**args)


@pytest.mark.parametrize(
    ("grad", "match"),
    [
        pytest.param(
            lambda op, dy: [dy, dy],
            r"returned 2 cotangents for 1 inputs",
            id="two_for_one",
        ),
        pytest.param(
            lambda op, dy: dy[:2],
            r"the gradient does not match the inputs: cotangent\[0\] has shape \(2,\), "
            r"the input \(4,\)",
            id="wrong_shape",
        ),
        pytest.param(
            lambda op, dy: dy.astype(jnp.complex64),
            r"the gradient does not match the inputs: cotangent\[0\] is complex "
            r"\(complex64\), the input float32",
            id="complex_for_real",
        ),
    ],
)
def test_bad_cotangents_from_grad(grad, match):
    f = lambda x: fg.py_func(_clip, [x], jnp.float32, grad=grad).sum()  # noqa: E731
    with pytest.raises(ValueError, match=r"fg\.py_func\(_clip, inp, Tout\): " + match):
        jax.grad(f)(X)


def test_grad_cotangents_are_cast_to_the_input_dtype_as_registered_gradients_are():
    # One dtype rule for every gradient function: a real cotangent is cast to its input's
    # dtype (a NumPy float64 gradient for a float32 input is the common case).
    grad = lambda op, dy: fg.py_func(  # noqa: E731
        lambda d: (2.0 * d).astype(np.float64), [dy], jnp.float64
    )
    f = lambda x: fg.py_func(_clip, [x], jnp.float32, grad=grad).sum()  # noqa: E731
    g = jax.grad(f)(X)
    assert g.dtype == jnp.float32
    np.testing.assert_array_equal(g, np.full(X.shape, 2.0, np.float32))


def test_two_inputs_grad_must_return_a_list():
    def f(a, b):
        return fg.py_func(lambda a, b: a * b, [a, b], jnp.float32, grad=lambda op, dy: dy).sum()

    with pytest.raises(ValueError, match=r"returned one cotangent for 2 inputs; return a list"):
        jax.grad(f)(X, X)


# --- errors reach their own caller, from any thread -------------------------------------


def _raising_in_thread(tid):
    def boom(a):
        raise ValueError(f"thread {tid}")

    def op(x):
        return fg.py_func(boom, [x], jnp.float32, grad=lambda op, dy: dy, name=f"t{tid}")

    return {
        "eager": op,
        "eager_fg_gradients": lambda x: fg.gradients(lambda x: op(x).sum(), x),
        "eager_jax_grad": jax.grad(lambda x: op(x).sum()),
        "jit": jax.jit(op),
    }


@pytest.mark.parametrize(
    ("context", "calls"),
    [
        pytest.param("eager", 100, id="eager"),
        pytest.param("jit", 100, id="jit"),
        # Each of these traces and evaluates a whole gradient: fewer calls, as many threads.
        pytest.param("eager_fg_gradients", 25, id="eager_fg_gradients"),
        pytest.param("eager_jax_grad", 25, id="eager_jax_grad"),
    ],
)
def test_each_host_error_reaches_its_own_caller_from_8_threads(context, calls):
    errors = {}

    def worker(tid):
        call = _raising_in_thread(tid)[context]
        errors[tid] = []
        for _ in range(calls):
            try:
                jax.block_until_ready(call(X))
            except Exception as e:
                errors[tid].append(e)

    threads = [threading.Thread(target=worker, args=(tid,)) for tid in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    want = jax.errors.JaxRuntimeError if context == "jit" else fg.PyFuncError
    for tid, got in errors.items():
        assert len(got) == calls
        assert {type(e) for e in got} == {want}
        assert all(f"fg.py_func(name='t{tid}', inp, Tout)" in str(e) for e in got)
        assert all(f"func raised ValueError: thread {tid}" in str(e) for e in got)
        if want is fg.PyFuncError:
            assert {(e.type_name, e.message) for e in got} == {("ValueError", f"thread {tid}")}


# --- eager calls: no callback, no compilation -------------------------------------------


def _rss_mb():
    """This process's resident memory, from /proc (Linux)."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


@pytest.mark.skipif(not os.path.exists("/proc/self/statm"), reason="reads /proc (Linux)")
def test_eager_calls_with_a_new_function_each_time_keep_no_memory():
    # A callback with a new func is compiled anew by JAX and kept: ~1.4 MB per call.
    def call(i):
        return fg.py_func(lambda a: np.clip(a, -3, 3) + np.float32(i), [X], jnp.float32)

    for i in range(20):
        call(i)
    gc.collect()
    before = _rss_mb()
    for i in range(300):
        out = call(i)
    gc.collect()
    assert _rss_mb() - before < 60
    np.testing.assert_array_equal(out, np.clip(X, -3, 3) + 299)
    assert isinstance(out, jax.Array) and out.dtype == jnp.float32


def test_constant_inputs_under_jit_still_run_on_every_call():
    calls = []

    def record(a):
        calls.append(a.copy())
        return a + 1

    constant = jnp.array([1.0, 2.0])
    step = jax.jit(lambda: fg.py_func(record, [constant], jnp.float32, stateful=True))
    for _ in range(3):
        np.testing.assert_array_equal(step(), [2.0, 3.0])
    assert len(calls) == 3


def test_an_eager_call_returns_what_the_callback_returns():
    tout = [jnp.float32, jax.ShapeDtypeStruct((), jnp.int32)]

    def host(x):
        return [x * 2, np.int32(x.size)]

    eager = fg.py_func(host, [X], tout)
    jitted = jax.jit(lambda x: fg.py_func(host, [x], tout))(X)
    chex.assert_trees_all_equal(eager, jitted)
    assert all(isinstance(o, jax.Array) for o in eager)


# --- side effects: Tout empty -----------------------------------------------------------


@pytest.mark.parametrize("tout", [[], ()], ids=["list", "tuple"])
def test_empty_tout_without_stateful_is_an_error_at_the_call(tout):
    def log(x):
        print(x)

    match = r"Tout is empty, so func runs only for its side effects.*pass stateful=True"
    with pytest.raises(ValueError, match=match):
        fg.py_func(log, [X], tout)
    with pytest.raises(ValueError, match=match):
        jax.jit(lambda x: fg.py_func(log, [x], tout))(X)


def test_empty_tout_with_stateful_runs_on_every_call_under_jit():
    seen = []

    def log(x):
        seen.append(float(x.sum()))

    @jax.jit
    def step(x):
        assert fg.py_func(log, [x], [], stateful=True) == []
        return x * 2

    for k in range(3):
        step(X + k)
    assert fg.py_func(log, [X], [], stateful=True) == []
    jax.effects_barrier()
    assert seen == [float((X + k).sum()) for k in range(3)] + [float(X.sum())]


def test_func_returning_none_is_an_error_naming_the_missing_return():
    def forgot(x):
        x * 2

    match = r"func returned None, but Tout lists 1 output\(s\); return them \(a missing return"
    with pytest.raises(fg.PyFuncError, match=match) as info:
        fg.py_func(forgot, [X], jnp.float32)
    assert info.value.type_name == "TypeError"
    with pytest.raises(jax.errors.JaxRuntimeError, match=match):
        jax.jit(lambda x: fg.py_func(forgot, [x], jnp.float32))(X).block_until_ready()


# --- a new func each call: nothing compiled anew, nothing kept --------------------------


def _clipped_relu(limit):
    """The docs' clipped ReLU, its functions made anew (as a closure over ``limit``)."""

    def forward_np(x):
        return np.clip(x, -limit, limit)

    def grad_np(x, dy):
        return (dy * ((x >= -limit) & (x <= limit))).astype(np.float32)

    def grad(op, dy):
        return fg.py_func(grad_np, [op.inputs[0], dy], jnp.float32)

    def clipped(x):
        return fg.py_func(forward_np, [x], jnp.float32, grad=grad, name="clipped_relu")

    return clipped, (forward_np, grad_np)


_CONTEXTS = {
    "eager_fg_gradients": lambda f, x: fg.gradients(lambda x: f(x), x),
    "eager_jax_grad": lambda f, x: jax.grad(lambda x: f(x).sum())(x),
}


@pytest.mark.parametrize("context", _CONTEXTS)
def test_a_gradient_that_makes_a_new_py_func_each_call_keeps_nothing(context):
    x = jnp.array([-2.0, -1.0, 0.5, 40.0])
    _CONTEXTS[context](_clipped_relu(3.0)[0], x)  # the first of a kind may stay compiled
    gc.collect()
    objects = len(gc.get_objects())
    funcs = []
    for i in range(30):
        clipped, numpy_funcs = _clipped_relu(3.0 + i)
        np.testing.assert_array_equal(_CONTEXTS[context](clipped, x), [1, 1, 1, 0])
        funcs += [weakref.ref(f) for f in numpy_funcs]
        del clipped, numpy_funcs
    gc.collect()
    # Before: each call compiled two callbacks that JAX kept, with their functions
    # (366 objects and 2.8 MB a call); now they are freed with the call.
    assert [f for f in funcs if f() is not None] == []
    assert len(gc.get_objects()) - objects < 300


def test_py_funcs_of_one_signature_each_run_their_own_func():
    x = jnp.array([1.0, -2.0, 3.0])

    def scaled(k):
        def grad(op, dy):
            return fg.py_func(lambda dy: (k * dy).astype(np.float32), [dy], jnp.float32)

        def f(x, vectorized=False):
            return fg.py_func(
                lambda a: (k * a).astype(np.float32),
                [x],
                jnp.float32,
                grad=grad,
                vectorized=vectorized,
            )

        return f

    def check(f, k):
        np.testing.assert_array_equal(fg.gradients(lambda x: f(x).sum(), x), [k] * 3)
        np.testing.assert_array_equal(jax.grad(lambda x: f(x).sum())(x), [k] * 3)
        np.testing.assert_array_equal(jax.jit(f)(x), k * x)
        batch = jnp.stack([x, 2 * x])
        np.testing.assert_array_equal(jax.vmap(f)(batch), k * batch)
        np.testing.assert_array_equal(jax.vmap(lambda x: f(x, vectorized=True))(batch), k * batch)

    fs = {k: scaled(float(k)) for k in (2, 3, 5)}
    for k in (5, 2, 3, 2):  # interleaved, so a shared executable would show
        check(fs[k], k)
