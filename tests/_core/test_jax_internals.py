"""The one door to JAX's internals (``funcgrad._core.jax_internals``).

Each structural equation is read through a typed view whose parts must add up; the
same equations, reshaped into the layout of the other JAX version (``num_consts`` /
``num_carry`` on JAX 0.10, the FlatTrees ``ft_in`` / ``ft_out`` on 0.11 and later),
give the same views and the same answers from every analysis, so both layouts are
tested whichever JAX runs the suite.  A layout that is missing or does not add up is a
clear error; an unknown holder of a sub-jaxpr warns; and no other module of the package
reads JAX's internals.
"""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax
from jax.extend import core
from jax.extend.core import primitives

import funcgrad as fg
from funcgrad._core import connectivity as _connectivity
from funcgrad._core import derivative_modes as _derivative_modes
from funcgrad._core import jax_internals as _jax
from funcgrad._core import rewrite as _rewrite
from funcgrad._core import sparse_reads as _sparse_reads
from funcgrad._core.jax_internals import Kind

X = jnp.arange(1.0, 4.0, dtype=jnp.float32)
W = jnp.float32(0.5)
TABLE = jnp.arange(12.0, dtype=jnp.float32).reshape(4, 3)
IDS = jnp.array([[1, 3], [0, 1]], jnp.int32)


def _eqns(jaxpr: _jax.Jaxpr):
    """Every equation of ``jaxpr`` and of its sub-jaxprs, in pre-order."""
    for eqn in jaxpr.eqns:
        yield eqn
        for sub in _jax.sub_jaxprs(eqn):
            yield from _eqns(sub)


def _of_kind(jaxpr: _jax.Jaxpr, k: Kind) -> list[_jax.Eqn]:
    return [e for e in _eqns(jaxpr) if _jax.kind(e) is k]


# --- the programs: every structure funcgrad follows -----------------------------------


def _scan_consts_carry_xs(x, w):
    def body(carry, xs):
        a, b = carry
        return (a * w + xs, b + jnp.sin(a)), a * fg.stop_gradient(b)

    (a, b), ys = lax.scan(body, (x, x * 2), jnp.ones((5, 3), jnp.float32))
    return a.sum() + b.sum() + ys.sum()


def _nested_scans(x, w):
    def outer(c, _):
        inner, _ = lax.scan(lambda d, _: (jnp.sin(d) * w, None), c, None, length=2)
        return inner + c, None

    return lax.scan(outer, x, None, length=3)[0].sum()


def _fori_loop(x, w):
    return lax.fori_loop(0, 4, lambda i, c: jnp.sin(c) * w + i, x).sum()


def _grad_of_remat_scan(x, w):
    # JAX emits an eval_jaxpr (closed_call before 0.11) with the known half of the scan.
    def loss(x):
        return jax.checkpoint(
            lambda x: lax.scan(lambda c, _: (jnp.sin(c) * w, None), x, None, length=3)[0]
        )(x).sum()

    return jax.grad(loss)(x).sum()


def _lookup_in_scan(table, w):
    def body(c, ids):
        return c + jnp.sin(table[ids]).sum() * w, None

    return lax.scan(body, jnp.float32(0.0), IDS)[0]


SCAN_PROGRAMS = [
    pytest.param(_scan_consts_carry_xs, (X, W), id="consts_carry_xs"),
    pytest.param(_nested_scans, (X, W), id="nested"),
    pytest.param(_fori_loop, (X, W), id="fori_loop"),
    pytest.param(_grad_of_remat_scan, (X, W), id="grad_of_remat_scan"),
    pytest.param(_lookup_in_scan, (TABLE, W), id="lookup_in_scan"),
]


# --- the other layout --------------------------------------------------------------------


class _FlatTree:
    """The part of JAX's FlatTree (``ft_in`` / ``ft_out``) the door reads: top-level
    groups of leaves."""

    def __init__(self, *sizes: int) -> None:
        self.sizes = sizes

    def unpack(self) -> list[tuple[None, ...]]:
        return [(None,) * n for n in self.sizes]


def _other_layout(eqn: _jax.Eqn, params: dict) -> dict:
    """A scan's parameters in the layout the running JAX does not use."""
    view = _jax.scan(eqn)
    n_xs = len(eqn.invars) - view.n_consts - view.n_carry
    rest = {
        k: v for k, v in params.items() if k not in ("num_consts", "num_carry", "ft_in", "ft_out")
    }
    if "num_consts" in params:  # JAX 0.10: give it JAX 0.11's FlatTrees
        n_ys = len(eqn.outvars) - view.n_carry
        ft_in = _FlatTree(view.n_consts, view.n_carry, n_xs)
        return {**rest, "ft_in": ft_in, "ft_out": _FlatTree(view.n_carry, n_ys)}
    return {**rest, "num_consts": view.n_consts, "num_carry": view.n_carry}


def _reshaped(value):
    """A jaxpr (closed or open, as a parameter holds it) with every scan, at any depth,
    in the other layout."""
    if _jax._SEPARATE_CLOSED and isinstance(value, core.ClosedJaxpr):
        return value.replace(jaxpr=_reshaped(value.jaxpr))
    eqns = []
    for eqn in value.eqns:
        params = {k: _reshaped_param(v) for k, v in eqn.params.items()}
        if _jax.kind(eqn) is Kind.SCAN:
            params = _other_layout(eqn, params)
        eqns.append(eqn.replace(params=params))
    return value.replace(eqns=eqns)


def _reshaped_param(value):
    if isinstance(value, tuple) and value and isinstance(value[0], _jax._JAXPR_TYPES):
        return tuple(_reshaped(v) for v in value)
    return _reshaped(value) if isinstance(value, _jax._JAXPR_TYPES) else value


def _both_layouts(f, *args) -> tuple[_jax.Closed, _jax.Closed]:
    real = _jax.trace(f, *args)
    return real, _jax.Closed(_reshaped(real.jaxpr), real.consts)


# --- real equations and their reshaped copies -------------------------------------------


@pytest.mark.parametrize(("f", "args"), SCAN_PROGRAMS)
def test_each_scan_reads_the_same_in_both_layouts(f, args):
    real, other = _both_layouts(f, *args)
    scans = _of_kind(real.jaxpr, Kind.SCAN)
    assert scans and len(scans) == len(_of_kind(other.jaxpr, Kind.SCAN))
    for a, b in zip(scans, _of_kind(other.jaxpr, Kind.SCAN), strict=True):
        va, vb = _jax.scan(a), _jax.scan(b)
        assert (va.n_consts, va.n_carry, va.length, va.reverse) == (
            vb.n_consts,
            vb.n_carry,
            vb.length,
            vb.reverse,
        )
        body = va.body.jaxpr
        consts, carry, xs = va.split(a.invars)
        # the carry is the body's first outputs, shaped as the carry going in
        assert [v.aval for v in carry] == [v.aval for v in body.outvars[: va.n_carry]]
        assert len(consts) + len(carry) + len(xs) == len(body.invars)


def test_a_scan_splits_into_its_constants_carry_and_xs():
    (scan,) = _of_kind(_jax.trace(_scan_consts_carry_xs, X, W).jaxpr, Kind.SCAN)
    view = _jax.scan(scan)
    consts, carry, xs = view.split(scan.invars)
    assert (len(carry), len(xs), view.length) == (2, 1, 5)
    assert [v.aval.shape for v in xs] == [(5, 3)]
    assert len(consts) == view.n_consts >= 1  # w at least


def test_while_cond_and_calls_add_up():
    def f(x, w):
        y = lax.while_loop(lambda c: c[0] < 3.0, lambda c: (c[0] + w, c[1] * w), (w, x))[1]
        z = lax.cond(w > 0, lambda a: jnp.sin(a) * w, lambda a: a, y)
        return jax.jit(jax.checkpoint(lambda a: a * w))(z)

    jaxpr = _jax.trace(f, X, W).jaxpr
    (loop,) = _of_kind(jaxpr, Kind.WHILE)
    view = _jax.while_loop(loop)
    cond_consts, body_consts, carry = view.split(loop.invars)
    assert len(carry) == 2 and len(cond_consts) == view.n_cond
    assert len(body_consts) == view.n_body >= 1
    (cond,) = _of_kind(jaxpr, Kind.COND)
    assert len(_jax.cond_branches(cond)) == 2
    (jit,) = _of_kind(jaxpr, Kind.JIT)
    (remat,) = _of_kind(jaxpr, Kind.REMAT)
    for eqn in (jit, remat):
        call = _jax.call(eqn)
        assert len(call.body.jaxpr.invars) == len(eqn.invars) and call.rule_consts == 0


def test_custom_rules_and_shard_map_are_calls():
    mesh = jax.make_mesh((1,), ("d",), devices=jax.devices()[:1])
    spec = jax.sharding.PartitionSpec()
    sharded = jax.shard_map(lambda a: a * 2.0, mesh=mesh, in_specs=spec, out_specs=spec)

    @fg.custom_gradient
    def scaled(x):
        return x * 2.0, lambda dy: dy

    def f(x):
        return jax.nn.relu(x) + scaled(x) + sharded(x)

    jaxpr = _jax.trace(f, X).jaxpr
    assert _of_kind(jaxpr, Kind.CUSTOM_JVP) and _of_kind(jaxpr, Kind.CUSTOM_VJP)
    assert _of_kind(jaxpr, Kind.SHARD_MAP)
    (relu,) = _of_kind(jaxpr, Kind.CUSTOM_JVP)
    assert _jax.called_name(relu) == "relu" and _rewrite.key(relu) == "relu"
    for eqn in _of_kind(jaxpr, Kind.CUSTOM_VJP):
        assert _jax.call(eqn).rule_consts == _jax.rule_consts(eqn)


@pytest.mark.parametrize(("f", "args"), SCAN_PROGRAMS)
def test_the_analyses_answer_the_same_in_both_layouts(f, args):
    real, other = _both_layouts(f, *args)
    n_in, n_out = len(real.jaxpr.invars), len(real.jaxpr.outvars)
    for outputs in ([True] * n_out, [False] * n_out):
        assert _connectivity.connected_inputs(
            real.jaxpr, outputs
        ) == _connectivity.connected_inputs(other.jaxpr, outputs)
        reach = [_connectivity.input_reach(c.jaxpr, outputs) for c in (real, other)]
        assert [(r.connected, r.used, len(r.cuts)) for r in reach[0]] == [
            (r.connected, r.used, len(r.cuts)) for r in reach[1]
        ]
    assert _derivative_modes.has_custom_vjp(real.jaxpr) == _derivative_modes.has_custom_vjp(
        other.jaxpr
    )
    assert _derivative_modes.jet_blocker(real.jaxpr) == _derivative_modes.jet_blocker(other.jaxpr)
    found = [_sparse_reads.find(c, range(n_in)) for c in (real, other)]
    assert found[0].tables == found[1].tables and found[0].parts == found[1].parts


def test_elementwise_analysis_answers_the_same_in_both_layouts():
    def f(x):
        return lax.fori_loop(0, 3, lambda i, c: jnp.sin(c) + x, x)

    real, other = _both_layouts(f, X)
    assert _derivative_modes.elementwise_mixers(real.jaxpr, X.shape) == []
    assert _derivative_modes.elementwise_mixers(other.jaxpr, X.shape) == []
    g = lambda x: lax.scan(lambda c, _: (c + jnp.sum(x), None), x, None, length=2)[0]  # noqa: E731
    real, other = _both_layouts(g, X)
    assert (
        _derivative_modes.elementwise_mixers(real.jaxpr, X.shape)
        == _derivative_modes.elementwise_mixers(other.jaxpr, X.shape)
        == ["reduce_sum"]
    )


@pytest.mark.parametrize(("f", "args"), SCAN_PROGRAMS[:3])
def test_rewriting_follows_both_layouts_to_the_same_values(f, args):
    real, other = _both_layouts(f, *args)
    matches = lambda e: e.primitive.name == "sin"  # noqa: E731
    twice = lambda e, invals: [2.0 * _jax.bind_equation(e, invals)[0]]  # noqa: E731
    rewriter = _rewrite.Rewriter(matches, twice)
    assert rewriter.reaches(real.jaxpr) and rewriter.reaches(other.jaxpr)
    want = rewriter.closed(real)(*args)
    got = rewriter.closed(other)(*args)
    assert want != real(*args)  # the rewrite changed the values
    np.testing.assert_array_equal(np.asarray(got[0]), np.asarray(want[0]))


def test_sparse_reads_follow_both_layouts_to_the_same_ids_and_values():
    real, other = _both_layouts(_lookup_in_scan, TABLE, W)
    outs = []
    for closed in (real, other):
        sparse = _sparse_reads.find(closed, [0])
        assert sparse.tables == [0]
        deltas = [r.zeros() for r in sparse.reads]
        values, ids = sparse.evaluate([TABLE, W], deltas, _jax.bind_equation)
        outs.append((np.asarray(values[0]), [np.asarray(i) for i in ids]))
    np.testing.assert_array_equal(outs[0][0], outs[1][0])
    for a, b in zip(outs[0][1], outs[1][1], strict=True):
        np.testing.assert_array_equal(a, b)


# --- eval_jaxpr (closed_call) is a call ------------------------------------------------


def _via_call(x, w):
    """``sin(x) * stop_gradient(w)`` called through JAX's closed-call primitive (named
    ``closed_call`` on JAX 0.10, ``eval_jaxpr`` on 0.11 and later)."""
    body = jax.make_jaxpr(lambda x, w: jnp.sin(x) * fg.stop_gradient(w))(x, w)
    call = primitives.closed_call_p
    return call.bind(x, w, **call.get_bind_params({"call_jaxpr": body}))[0].sum()


def test_eval_jaxpr_is_a_call_whatever_its_name():
    jaxpr = _jax.trace(_via_call, X, W).jaxpr
    (call,) = _of_kind(jaxpr, Kind.CALL)
    renamed = jaxpr.replace(
        eqns=[e.replace(primitive=core.Primitive("eval_jaxpr")) if e is call else e
              for e in jaxpr.eqns]
    )  # fmt: skip
    (call,) = _of_kind(renamed, Kind.CALL)
    assert call.primitive.name == "eval_jaxpr"
    # followed: the stop_gradient inside cuts w, and the sin inside is reached
    assert _connectivity.connected_inputs(renamed, [True]) == [True, False]
    assert _rewrite.Rewriter(lambda e: e.primitive.name == "sin", None).reaches(renamed)
    assert "eval_jaxpr" not in _jax.first_order_primitive_names()
    assert "closed_call" not in _jax.first_order_primitive_names()
    assert _of_kind(_jax.trace(_grad_of_remat_scan, X, W).jaxpr, Kind.CALL)


def test_gradients_and_overrides_reach_inside_eval_jaxpr():
    gx, gw = fg.gradients(_via_call, [X, W])
    np.testing.assert_allclose(gx, jnp.cos(X) * W, rtol=1e-6)
    assert gw is None  # zeros, were the call not followed
    overridden = fg.gradient_override_map(_via_call, {"Sin": "Identity"})
    np.testing.assert_allclose(jax.grad(overridden)(X, W), jnp.full(3, W), rtol=1e-6)


# --- layouts funcgrad does not know -------------------------------------------------------


def _scan_eqn() -> _jax.Eqn:
    (scan,) = _of_kind(_jax.trace(_scan_consts_carry_xs, X, W).jaxpr, Kind.SCAN)
    return scan


def _without(params: dict, *names: str) -> dict:
    return {k: v for k, v in params.items() if k not in names}


@pytest.mark.parametrize(
    ("change", "match"),
    [
        pytest.param(
            lambda p: _without(p, "num_consts", "num_carry", "ft_in", "ft_out"),
            "neither num_consts/num_carry nor ft_in/ft_out",
            id="no_split",
        ),
        pytest.param(
            lambda p: {**_without(p, "num_consts", "num_carry", "ft_in", "ft_out"),
                       "num_consts": 7, "num_carry": 2},
            r"do not add up to its \d+ inputs",
            id="too_many_consts",
        ),
        pytest.param(
            lambda p: {**_without(p, "num_consts", "num_carry", "ft_in", "ft_out"),
                       "ft_in": _FlatTree(1, 2, 1), "ft_out": _FlatTree(1, 1)},
            "ft_in has 2 carries and ft_out 1",
            id="carries_disagree",
        ),
        pytest.param(
            lambda p: {**_without(p, "num_consts", "num_carry", "ft_in", "ft_out"),
                       "ft_in": _FlatTree(1, 2), "ft_out": _FlatTree(2, 1)},
            "has 2 groups, not 3",
            id="two_groups",
        ),
        pytest.param(
            lambda p: {**_without(p, "num_consts", "num_carry", "ft_in", "ft_out"),
                       "ft_in": object(), "ft_out": object()},
            "does not unpack",
            id="not_a_flat_tree",
        ),
        pytest.param(lambda p: _without(p, "length"), "it has no 'length'", id="no_length"),
    ],
)  # fmt: skip
def test_a_scan_layout_that_is_unknown_or_does_not_add_up_is_refused(change, match):
    eqn = _scan_eqn()
    bad = eqn.replace(params=change(dict(eqn.params)))
    with pytest.raises(_jax.UnsupportedJaxprLayoutError, match=match) as info:
        _jax.scan(bad)
    message = str(info.value)
    assert jax.__version__ in message and "'scan'" in message and "parameters [" in message


def test_other_layouts_that_do_not_add_up_are_refused():
    def f(x, w):
        y = lax.while_loop(lambda c: c[0] < 3.0, lambda c: (c[0] + w, c[1] * w), (w, x))[1]
        return lax.cond(w > 0, jnp.sin, jnp.cos, y)

    jaxpr = _jax.trace(f, X, W).jaxpr
    (loop,) = _of_kind(jaxpr, Kind.WHILE)
    bad = loop.replace(params={**loop.params, "body_nconsts": loop.params["body_nconsts"] + 1})
    with pytest.raises(_jax.UnsupportedJaxprLayoutError, match=r"'while'.*do not match"):
        _jax.while_loop(bad)
    with pytest.raises(_jax.UnsupportedJaxprLayoutError, match="it has no 'cond_nconsts'"):
        _jax.while_loop(loop.replace(params=_without(loop.params, "cond_nconsts")))
    (cond,) = _of_kind(jaxpr, Kind.COND)
    short = cond.replace(invars=cond.invars[:1])
    with pytest.raises(_jax.UnsupportedJaxprLayoutError, match="a branch's inputs"):
        _jax.cond_branches(short)
    (jit,) = _of_kind(_jax.trace(jax.jit(jnp.sin), X).jaxpr, Kind.JIT)
    with pytest.raises(_jax.UnsupportedJaxprLayoutError, match="its body has 1 inputs"):
        _jax.call(jit.replace(invars=[*jit.invars, *jit.invars]))
    with pytest.raises(_jax.UnsupportedJaxprLayoutError, match="not a call"):
        _jax.call(loop)
    body = _jax.call(jit).body
    with pytest.raises(_jax.UnsupportedJaxprLayoutError, match="0 constvars and 1 constants"):
        _jax.Closed(body.jaxpr, (W,))


def test_an_unknown_holder_of_a_jaxpr_warns_and_is_conservative():
    body = _jax.trace(lambda a, b: a * jnp.round(b), W, W).jaxpr
    eqn = _of_kind(_jax.trace(jax.jit(lambda a, b: a * jnp.round(b)), W, W).jaxpr, Kind.JIT)[0]
    unknown = eqn.replace(primitive=core.Primitive("future_call"), params={"body": body})
    with pytest.warns(_jax.UnknownJaxprWarning, match="'future_call' of JAX .* holds a sub-jaxpr"):
        assert _jax.kind(unknown) is Kind.UNKNOWN
    outer = _jax.trace(lambda a, b: a + b, W, W).jaxpr
    program = outer.replace(eqns=[unknown])
    program = program.replace(outvars=unknown.outvars, invars=unknown.invars)
    # every input reaches every output, where following the body would cut b
    assert _connectivity.connected_inputs(program, [True]) == [True, True]


def test_no_equation_of_the_supported_programs_is_of_an_unknown_kind():
    """Every structure a funcgrad user writes, traced on this JAX: a holder of a
    sub-jaxpr that the door does not know fails here (and, as a warning, anywhere in the
    suite) instead of degrading quietly."""
    mesh = jax.make_mesh((1,), ("d",), devices=jax.devices()[:1])
    spec = jax.sharding.PartitionSpec()

    def everything(x, w, table):
        y = _scan_consts_carry_xs(x, w) + _nested_scans(x, w) + _fori_loop(x, w)
        y += _grad_of_remat_scan(x, w) + _lookup_in_scan(table, w)
        y += lax.while_loop(lambda c: c < 3.0, lambda c: c + 1.0, fg.stop_gradient(w))
        y += lax.switch(1, [jnp.sin, jnp.cos, jnp.tan], w)
        y += jax.jit(jax.checkpoint(jnp.sin, policy=jax.checkpoint_policies.nothing_saveable))(w)
        y += jax.nn.relu(x).sum() + jax.nn.gelu(x).sum() + jnp.clip(x, 0.0, 1.0).sum()
        y += jax.shard_map(lambda a: a * 2, mesh=mesh, in_specs=spec, out_specs=spec)(
            jnp.ones(2)
        ).sum()
        y += jax.vmap(lambda a: lax.scan(lambda c, _: (c * a, None), a, None, length=2)[0])(x).sum()
        y += lax.custom_linear_solve(
            lambda v: 2 * v, x, lambda m, b: b / 2, lambda m, b: b / 2
        ).sum()
        y += lax.reduce_window(x, -jnp.inf, lax.max, (2,), (1,), "VALID").sum()
        y += x.at[jnp.array([0, 1])].add(w).sum() + jnp.sort(x).sum() + jnp.cumsum(x).sum()
        y += fg.py_func(np.sin, [fg.stop_gradient(x)], jnp.float32).sum()
        return y

    def second_order(x, w, table):
        return jax.grad(lambda w: jax.grad(lambda w: everything(x, w, table))(w))(w)

    for f in (everything, second_order, jax.jit(jax.grad(everything, argnums=(0, 1)))):
        kinds = {_jax.kind(e) for e in _eqns(_jax.trace(f, X, W, TABLE).jaxpr)}
        assert Kind.UNKNOWN not in kinds
    assert {Kind.SCAN, Kind.WHILE, Kind.COND, Kind.JIT, Kind.REMAT} <= kinds


# --- the architecture: one door ------------------------------------------------------------

PACKAGE = Path(fg.__file__).parent
DOOR = PACKAGE / "_core" / "jax_internals.py"
#: Parameters of structural equations, and the other names of JAX's internals.
FORBIDDEN_NAMES = frozenset(
    {
        "num_consts", "num_carry", "ft_in", "ft_out", "cond_nconsts", "body_nconsts",
        "branches", "call_jaxpr", "cond_jaxpr", "body_jaxpr", "jaxpr", "fun_jaxpr",
        "update_jaxpr", "keep_unused", "prevent_cse", "_split_transpose", "bwd",
        # structural primitives
        "scan", "while", "cond", "jit", "pjit", "closed_call", "eval_jaxpr", "call",
        "core_call", "remat2", "shard_map", "custom_jvp_call",
        "custom_vjp_call", "custom_vjp_call_jaxpr", "custom_lin", "custom_linear_solve",
    }
)  # fmt: skip
FORBIDDEN_IDENTIFIERS = frozenset(
    {
        "ClosedJaxpr", "jaxprs_in_params", "jaxpr_as_fun", "get_bind_params",
        "source_info", "source_info_util", "jet_rules", "get_opaque_trace_state",
        "make_jaxpr", "primitives",
    }
)  # fmt: skip


def _violations(path: Path) -> list[str]:
    tree = ast.parse(path.read_text())
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    found = []
    for node in ast.walk(tree):
        line = getattr(node, "lineno", 0)
        if (
            isinstance(node, ast.ImportFrom)
            and node.module
            and (
                node.module.startswith(("jax.extend", "jax._src", "jax.interpreters", "jax.core"))
                or (
                    node.module == "jax.experimental"
                    and any(a.name == "jet" for a in node.names)
                    and path.name != "higher_order.py"
                )
            )
        ):
            found.append(f"{line}: from {node.module} import ...")
        elif isinstance(node, ast.Import) and any(
            a.name.startswith(("jax.extend", "jax._src", "jax.interpreters")) for a in node.names
        ):
            found.append(f"{line}: import {node.names[0].name}")
        elif isinstance(node, ast.Constant) and id(node) not in docstrings:
            if isinstance(node.value, str) and node.value in FORBIDDEN_NAMES:
                found.append(f"{line}: {node.value!r}")
        elif isinstance(node, ast.Attribute) and node.attr in FORBIDDEN_IDENTIFIERS:
            found.append(f"{line}: .{node.attr}")
        elif isinstance(node, ast.Name) and node.id in FORBIDDEN_IDENTIFIERS:
            found.append(f"{line}: {node.id}")
        elif (
            isinstance(node, ast.Attribute)
            and node.attr == "core"
            and isinstance(node.value, ast.Name)
            and node.value.id == "jax"
            and not _is_tracer_check(tree, node)
        ):
            found.append(f"{line}: jax.core")
    return found


def _is_tracer_check(tree: ast.AST, core_attr: ast.Attribute) -> bool:
    """Whether ``jax.core`` is read as ``jax.core.Tracer`` (public API, in every version)."""
    return any(
        isinstance(n, ast.Attribute) and n.value is core_attr and n.attr == "Tracer"
        for n in ast.walk(tree)
    )


def test_no_other_module_reads_jax_internals():
    offenders = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        if path != DOOR and (found := _violations(path)):
            offenders[str(path.relative_to(PACKAGE))] = found
    assert not offenders, (
        f"these modules read JAX's internals; ask funcgrad._core.jax_internals instead: {offenders}"
    )


def test_the_architecture_check_sees_what_it_forbids(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text(
        '"""A docstring may say scan."""\n'
        "from jax.extend import core\n"
        "n = eqn.params['num_consts']\n"
        "if eqn.primitive.name == 'scan': pass\n"
        "c = core.ClosedJaxpr(j, [])\n"
        "j = jax.make_jaxpr(f)(x)\n"
        "t = jax.core.Tracer\n"
        "jax.core.get_opaque_trace_state()\n"
    )
    found = _violations(bad)
    assert sorted({int(f.split(":")[0]) for f in found}) == [2, 3, 4, 5, 6, 8], found


def test_the_views_are_frozen_records():
    view = _jax.scan(_scan_eqn())
    with pytest.raises(dataclasses.FrozenInstanceError):
        view.length = 3  # type: ignore[misc]
