"""fg.explain_unconnected: each kind of cut, named with the line of this file that made it."""

import inspect
import os

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import funcgrad as fg
from funcgrad import diagnostics

X, Y = jnp.float32(1.5), jnp.float32(2.0)
V = jnp.array([0.5, -1.0, 2.0])
CUT = "every path is cut"


def line(fn, marker: str) -> str:
    """``"test_diagnostics.py:N"`` for the one line of ``fn``'s source ending ``# marker``."""
    fn = inspect.unwrap(fn)
    lines, start = inspect.getsourcelines(fn)
    hits = [start + i for i, text in enumerate(lines) if text.rstrip().endswith(f"# {marker}")]
    assert len(hits) == 1, f"{marker!r} marks {len(hits)} lines of {fn.__name__}"
    return f"{os.path.basename(inspect.getsourcefile(fn))}:{hits[0]}"


def explain(variant, f, xs, **options):
    """``fg.explain_unconnected(f, xs)``, computed eagerly or while tracing a jitted function."""
    seen = []

    def probe(*values):
        seen.append(fg.explain_unconnected(f, list(values), **options))
        return jnp.zeros(())

    variant(probe)(*xs)
    return seen[0]


def cut_by(*cuts):
    return fg.Unconnected(CUT, tuple(cuts))


# --- one function per kind of cut ------------------------------------------------------


def stopped(x, y):
    return jax.lax.stop_gradient(x) * y  # cut


def stopped_by_fg(x, y):
    return fg.stop_gradient(x) * y  # cut


def cast_to_int(x, y):
    return x.astype(jnp.int32).astype(jnp.float32) * y  # cut


def floored(x, y):
    return jnp.floor(x) * y  # cut


def rounded(x, y):
    return jnp.round(x) * y  # cut


def ceiled(x, y):
    return jnp.ceil(x) * y  # cut


def arg_maxed(x, y):
    return jnp.argmax(x).astype(jnp.float32) * y  # cut


def arg_mined(x, y):
    return jnp.argmin(x).astype(jnp.float32) * y  # cut


def compared(x, y):
    return (x > 0).astype(jnp.float32) * y  # cut


def to_the_zeroth(x, y):
    return jax.lax.integer_pow(x, 0) * y  # cut


def no_grad_py_func(x, y):
    return fg.py_func(np.sin, [x], jnp.float32) * y  # cut


CASES = [
    pytest.param(stopped, X, ("stop_gradient", ""), id="stop_gradient"),
    pytest.param(stopped_by_fg, X, ("stop_gradient", ""), id="fg.stop_gradient"),
    pytest.param(cast_to_int, X, ("convert_element_type", "to int32"), id="astype_int"),
    pytest.param(floored, X, ("floor", ""), id="floor"),
    pytest.param(rounded, X, ("round", ""), id="round"),
    pytest.param(ceiled, X, ("ceil", ""), id="ceil"),
    pytest.param(arg_maxed, V, ("argmax", "to int32"), id="argmax"),
    pytest.param(arg_mined, V, ("argmin", "to int32"), id="argmin"),
    pytest.param(compared, X, ("gt", "to bool"), id="comparison"),
    pytest.param(to_the_zeroth, X, ("integer_pow", "with exponent 0"), id="integer_pow_0"),
    pytest.param(no_grad_py_func, X, ("py_func", "without grad"), id="py_func_without_grad"),
]


@pytest.mark.parametrize(("f", "x", "what"), CASES)
def test_each_cut_is_named_with_its_line(variant, f, x, what):
    assert fg.gradients(f, [x, Y])[0] is None
    why = explain(variant, f, [x, Y])
    assert why == [cut_by(fg.Cut(*what[:1], line(f, "cut"), what[1])), None]


@pytest.mark.parametrize(("f", "x", "what"), CASES)
def test_each_cut_inside_a_jitted_f(f, x, what):
    # The cut is then an equation of a sub-jaxpr; its line is still the one in f.
    why = fg.explain_unconnected(jax.jit(f), [x, Y])
    assert why == [cut_by(fg.Cut(what[0], line(f, "cut"), what[1])), None]


def test_a_stopped_tap_is_named(variant):
    def f(x, y):
        h = fg.tap(x * y, "h")  # tap
        return h * h

    why = explain(variant, f, [X, Y], stop_gradients=["h"])
    tap = fg.Cut("tap", line(f, "tap"), "'h' in stop_gradients")
    assert why == [cut_by(tap), cut_by(tap)]
    assert explain(variant, f, [X, Y]) == [None, None]


def test_sign_is_not_a_cut(variant):
    # TensorFlow registers a zero gradient for Sign: connected, with zeros.
    assert explain(variant, lambda x, y: jnp.sign(x) * y, [X, Y]) == [None, None]


def test_integer_and_boolean_inputs(variant):
    def f(x, n, b):
        return x * n.astype(jnp.float32) * b.astype(jnp.float32)

    int_dtype = fg.Unconnected("integer dtype")
    assert explain(variant, f, [X, jnp.int32(2), jnp.bool_(True)]) == [None, int_dtype, int_dtype]


def test_not_used_by_f(variant):
    def f(x, y, z):
        _ = jnp.sin(z)  # computed and dropped
        return y * 2.0, x > 0  # x reaches only a boolean output, never differentiated

    not_used = fg.Unconnected("not used by f")
    assert explain(variant, f, [X, Y, X]) == [not_used, None, not_used]


def test_dead_uses_do_not_count_against_every_path_is_cut(variant):
    def f(x, y):
        _ = jnp.floor(x)  # a cut on a value that reaches no output: not a path
        return jax.lax.stop_gradient(x) * y  # cut

    assert explain(variant, f, [X, Y])[0] == cut_by(fg.Cut("stop_gradient", line(f, "cut")))


def test_every_cut_up_to_the_first_connected_value(variant):
    def f(x, y):
        h = jax.lax.stop_gradient(jnp.round(x)) + y  # round, then stop_gradient
        return h + jnp.floor(h)  # floor: h is connected through y, so it does not count

    where = line(f, "round, then stop_gradient")
    assert explain(variant, f, [X, Y]) == [
        cut_by(fg.Cut("round", where), fg.Cut("stop_gradient", where)),
        None,
    ]


def test_several_paths_several_cuts(variant):
    def f(x, y):
        a = jnp.floor(x)  # floor
        b = jnp.argmax(x * V).astype(jnp.float32)  # argmax
        return (a + b) * y

    assert explain(variant, f, [X, Y])[0] == cut_by(
        fg.Cut("floor", line(f, "floor")), fg.Cut("argmax", line(f, "argmax"), "to int32")
    )


# --- through jit, scan, cond and while -------------------------------------------------


@jax.jit
def _inner_jit(x):
    return jnp.floor(x) * 2.0  # in inner jit


@jax.jit
def _outer_jit(x, y):
    return _inner_jit(x) * y


def test_nested_jit(variant):
    why = explain(variant, _outer_jit, [X, Y])
    assert why == [cut_by(fg.Cut("floor", line(_inner_jit, "in inner jit"))), None]


def test_scan_body(variant):
    def f(x, y):
        def body(carry, _):
            return jax.lax.stop_gradient(carry) * y, None  # in scan

        return jax.lax.scan(body, x, None, length=3)[0]

    assert explain(variant, f, [X, Y]) == [
        cut_by(fg.Cut("stop_gradient", line(f, "in scan"))),
        None,
    ]


def test_cond_branch_and_index(variant):
    def f(x, y, z):
        return jax.lax.cond(
            z > 0,  # index
            lambda a, b: jnp.round(a) * b,  # branch
            lambda a, b: b,
            x,
            y,
        )

    assert explain(variant, f, [X, Y, X]) == [
        cut_by(fg.Cut("round", line(f, "branch"))),
        None,
        cut_by(fg.Cut("gt", line(f, "index"), "to bool")),
    ]


def test_while_predicate_and_body(variant):
    def f(x, y, z):
        def body(c):
            return c + jnp.ceil(y)  # body

        return jax.lax.while_loop(lambda c: c < x, body, z)  # predicate

    assert explain(variant, f, [X, Y, X]) == [
        cut_by(fg.Cut("lt", line(f, "predicate"), "to bool")),
        cut_by(fg.Cut("ceil", line(f, "body"))),
        None,
    ]


def test_jit_in_scan_in_cond(variant):
    @jax.jit
    def step(c):
        return jnp.floor(c) * 2.0  # deepest

    def f(x, y):
        def body(c, _):
            return step(c), None

        scanned = lambda a: jax.lax.scan(body, a, None, length=2)[0]  # noqa: E731
        return jax.lax.cond(y > 0, scanned, jnp.zeros_like, x) * y

    why = explain(variant, f, [X, Y])
    assert why == [cut_by(fg.Cut("floor", line(step, "deepest"))), None]


def test_custom_rules_are_not_cut_inside(variant):
    # A straight-through estimator: the custom rule reaches x, so x is connected.
    @jax.custom_jvp
    def straight_round(x):
        return jnp.round(x)

    straight_round.defjvp(lambda p, t: (straight_round(p[0]), t[0]))
    assert explain(variant, lambda x, y: straight_round(x) * y, [X, Y]) == [None, None]


def test_checkpointed_function(variant):
    def f(x, y):
        return jax.checkpoint(lambda a: jax.lax.stop_gradient(a) * y)(x)  # remat

    assert explain(variant, f, [X, Y]) == [cut_by(fg.Cut("stop_gradient", line(f, "remat"))), None]


# --- the calling convention, vmap, and no run-time cost --------------------------------


def test_xs_forms_as_fg_gradients():
    def f(p):
        return jnp.floor(p["w"]) * p["b"]  # cut

    why = fg.explain_unconnected(f, {"w": X, "b": Y, "n": jnp.int32(1)})
    assert why == {
        "w": cut_by(fg.Cut("floor", line(f, "cut"))),
        "b": None,
        "n": fg.Unconnected("integer dtype"),
    }

    def g(x):
        return jnp.round(x)  # cut

    assert fg.explain_unconnected(g, X) == cut_by(fg.Cut("round", line(g, "cut")))
    assert fg.explain_unconnected(lambda a, b: a[0] * b, ([X, Y], X)) == [
        [None, fg.Unconnected("not used by f")],
        None,
    ]


def test_grad_ys_is_checked_and_zero_cotangents_still_connect():
    f = lambda x, y: [x * y, jnp.floor(x)]  # noqa: E731
    why = fg.explain_unconnected(f, [X, Y], grad_ys=[jnp.float32(0.0), None])
    assert why == [None, None]
    with pytest.raises(ValueError, match=r"grad_ys does not match f's outputs"):
        fg.explain_unconnected(f, [X, Y], grad_ys=[jnp.zeros(2), None])


def test_under_vmap():
    seen = []

    def probe(x):
        seen.append(fg.explain_unconnected(floored, [x, Y]))
        return x

    jax.vmap(probe)(V)
    assert seen == [[cut_by(fg.Cut("floor", line(floored, "cut"))), None]]


def _loss(x):
    return jnp.sum(jnp.sin(x) * jax.lax.stop_gradient(x) + jnp.floor(x) ** 2)


def _step(explained):
    def step(x):
        if explained:
            explained.append(fg.explain_unconnected(_loss, x))
        return _loss(x)

    return step


def test_trace_time_only_the_compiled_program_is_unchanged():
    # Both programs are lowered from the same line: their metadata holds the call stack.
    seen, programs = ["explain"], []
    for explained in ([], seen):
        programs.append(jax.jit(_step(explained)).lower(V).compile().as_text())
    assert seen[1:] == [None]  # the explanation was computed while tracing...
    assert programs[1] == programs[0]  # ...and added nothing to the program
    assert "stop_gradient" not in programs[0]
    for explain_first in (False, True):
        if explain_first:
            assert fg.explain_unconnected(_loss, V) is None
        programs.append(jax.jit(_loss).lower(V).compile().as_text())
    assert programs[3] == programs[2]


# --- format_unconnected ----------------------------------------------------------------


def test_format_unconnected_names_each_unconnected_input():
    why = fg.explain_unconnected(floored, [X, Y])
    assert fg.format_unconnected(why, ["W", "b"]) == (
        f"W: every path is cut by floor at {line(floored, 'cut')}"
    )
    where = line(floored, "cut")
    assert fg.format_unconnected(why) == f"xs[0]: every path is cut by floor at {where}"
    unused = fg.explain_unconnected(lambda p: p["b"] * 2.0, {"w": X, "b": Y})
    assert fg.format_unconnected(unused) == "xs['w']: not used by f"
    assert fg.format_unconnected(fg.explain_unconnected(lambda x: x * 2.0, X)) == ""
    assert fg.format_unconnected(fg.explain_unconnected(lambda x: Y, X)) == "xs: not used by f"


def test_str_of_the_records():
    cut = fg.Cut("convert_element_type", "model.py:12", "to int32")
    assert str(cut) == "convert_element_type to int32 at model.py:12"
    assert str(fg.Cut("floor", "model.py:3")) == "floor at model.py:3"
    assert str(fg.Unconnected("integer dtype")) == "integer dtype"
    assert str(cut_by(cut, fg.Cut("floor", "m.py:3"))) == (
        "every path is cut by convert_element_type to int32 at model.py:12, floor at m.py:3"
    )


# --- bad inputs ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        pytest.param(
            lambda: fg.explain_unconnected("f", X),
            TypeError,
            r"fg\.explain_unconnected\(f, xs\): f must be a function, got str",
            id="f_not_callable",
        ),
        pytest.param(
            lambda: fg.explain_unconnected(floored, []),
            ValueError,
            r"xs is empty",
            id="xs_empty",
        ),
        pytest.param(
            lambda: fg.explain_unconnected(lambda d: d["a"], {"a": X, "s": "text"}),
            TypeError,
            r"xs\['s'\] is a str; every leaf of xs must be an array",
            id="xs_leaf_not_array",
        ),
        pytest.param(
            lambda: fg.explain_unconnected(floored, [X, Y], stop_gradients=[3]),
            TypeError,
            r"stop_gradients must hold tap names",
            id="stop_gradients_not_names",
        ),
        pytest.param(
            lambda: fg.explain_unconnected(floored, [X, Y], stop_gradients=["h"]),
            KeyError,
            r"stop_gradients names \['h'\], but f taps only \[\]",
            id="unknown_tap",
        ),
        pytest.param(
            lambda: fg.explain_unconnected(lambda x: None, X),
            TypeError,
            r"f returned None",
            id="f_returns_none",
        ),
        pytest.param(
            lambda: fg.format_unconnected([None, "why"]),
            TypeError,
            r"fg\.format_unconnected\(explanations, names\): explanations\[1\] is a str; pass "
            r"what fg\.explain_unconnected returned",
            id="format_not_explanations",
        ),
        pytest.param(
            lambda: fg.format_unconnected([None, None], ["a"]),
            ValueError,
            r"got 1 names for 2 inputs",
            id="format_names_count",
        ),
        pytest.param(
            lambda: fg.format_unconnected([None], [1]),
            TypeError,
            r"names\[0\] is a int",
            id="format_name_not_str",
        ),
    ],
)
def test_bad_inputs(call, error, match):
    with pytest.raises(error, match=match):
        call()


def test_whose_frame_is_the_users():
    assert not diagnostics._is_user_file(jax.numpy.__file__)
    assert not diagnostics._is_user_file(fg.gradients.__code__.co_filename)
    assert not diagnostics._is_user_file(os.__file__)  # the standard library
    assert diagnostics._is_user_file(optax.__file__)  # installed, even inside it
    assert diagnostics._is_user_file(__file__)


# --- the innermost line of the user's code, not the outermost ---------------------------


def _helper_that_floors(x):
    return jnp.floor(x) * 2.0  # in the helper


def _calls_the_helper(x, y):
    return _helper_that_floors(x) * y  # calls the helper


def test_a_cut_made_in_a_helper_names_the_helpers_line(variant):
    why = explain(variant, _calls_the_helper, [X, Y])
    assert why == [cut_by(fg.Cut("floor", line(_helper_that_floors, "in the helper"))), None]
    assert line(_helper_that_floors, "in the helper") != line(_calls_the_helper, "calls the helper")
