"""fg.clip_*: closed forms, finite differences, TensorFlow's gradient conventions, jit/vmap."""

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.test_util import check_grads

import funcgrad as fg

_RNG = np.random.default_rng(1)


def _normal(*shape):
    return jnp.asarray(_RNG.normal(size=shape), jnp.float32)


# --- clip_by_value ---------------------------------------------------------------------


def test_clip_by_value_is_np_clip() -> None:
    t = _normal(4, 5)
    np.testing.assert_array_equal(fg.clip_by_value(t, -0.5, 0.5), np.clip(t, -0.5, 0.5))


def test_clip_by_value_gradient_passes_on_the_closed_interval() -> None:
    t = jnp.array([-2.0, -1.0, 0.0, 1.0, 2.0, jnp.nan])
    grads = jax.grad(lambda t, lo, hi: fg.clip_by_value(t, lo, hi).sum(), argnums=(0, 1, 2))
    dt, dlo, dhi = grads(t, jnp.float32(-1.0), jnp.float32(1.0))
    assert dt.tolist() == [0.0, 1.0, 1.0, 1.0, 0.0, 0.0]  # both bounds included
    assert float(dlo) == 2.0  # -2.0 and NaN, as TensorFlow's maximum routes them
    assert float(dhi) == 1.0  # 2.0 only


def test_clip_by_value_forward_mode_agrees_with_reverse() -> None:
    t, v = jnp.array([-2.0, -1.0, 0.5, 1.0]), jnp.array([1.0, 2.0, 3.0, 4.0])
    _, tangent = jax.jvp(lambda t: fg.clip_by_value(t, -1.0, 1.0), (t,), (v,))
    assert tangent.tolist() == [0.0, 2.0, 3.0, 4.0]


def test_clip_by_value_finite_differences_away_from_the_bounds() -> None:
    t = jnp.array([-3.0, -0.3, 0.2, 0.7, 2.5])
    check_grads(jax.jit(fg.clip_by_value), (t, jnp.float32(-1.0), jnp.float32(1.0)), order=2)


def test_clip_by_value_keeps_nan_and_clips_inf() -> None:
    out = fg.clip_by_value(jnp.array([jnp.nan, jnp.inf, -jnp.inf]), -1.0, 1.0)
    np.testing.assert_array_equal(out, [np.nan, 1.0, -1.0])


def test_clip_by_value_broadcasts_array_bounds_and_sums_their_gradient() -> None:
    t = jnp.array([[-2.0, 0.0, 2.0], [-2.0, 0.0, 2.0]])
    lo = jnp.array([[-1.0], [0.5]])
    out, vjp = jax.vjp(lambda lo: fg.clip_by_value(t, lo, jnp.float32(1.0)), lo)
    assert out.tolist() == [[-1.0, 0.0, 1.0], [0.5, 0.5, 1.0]]
    assert vjp(jnp.ones_like(t))[0].tolist() == [[1.0], [2.0]]


def test_clip_by_value_weak_bounds_take_the_dtype_of_t() -> None:
    t = jnp.array([-2.0, 0.5, 2.0], jnp.bfloat16)
    out = fg.clip_by_value(t, jnp.array(-1.0), 1)
    assert out.dtype == jnp.bfloat16 and out.tolist() == [-1.0, 0.5, 1.0]


def test_clip_by_value_on_integers() -> None:
    out = fg.clip_by_value(jnp.arange(5), 1, 3)
    assert out.dtype == jnp.int32 and out.tolist() == [1, 1, 2, 3, 3]


def test_clip_by_value_under_jit_and_vmap() -> None:
    t, lo = _normal(6, 3), jnp.array([-0.1, -0.2, -0.3, -0.4, -0.5, -0.6])
    got = jax.jit(jax.vmap(fg.clip_by_value, in_axes=(0, 0, None)))(t, lo, jnp.float32(0.2))
    np.testing.assert_array_equal(got, np.clip(t, lo[:, None], 0.2))


@pytest.mark.parametrize(
    ("t", "lo", "hi", "error", "match"),
    [
        pytest.param(jnp.ones(3), 1.0, -1.0, ValueError, "lo <= hi", id="lo_above_hi"),
        pytest.param(
            jnp.ones(3),
            np.array([0.0, 2.0, 0.0], np.float32),
            1.0,
            ValueError,
            "lo <= hi",
            id="lo_above_hi_somewhere",
        ),
        pytest.param(jnp.ones(3), float("nan"), 1.0, ValueError, "no NaN", id="nan_bound"),
        pytest.param(
            jnp.ones(3),
            jnp.zeros((2, 3)),
            1.0,
            ValueError,
            "does not broadcast",
            id="bound_expands_t",
        ),
        pytest.param(jnp.arange(3), -0.5, 1, TypeError, "is a float", id="float_bound_int_t"),
        pytest.param(
            jnp.arange(3),
            0,
            jnp.array(1.5),
            TypeError,
            "is a float",
            id="weak_float_array_bound_int_t",
        ),
        pytest.param(
            jnp.ones(3),
            jnp.zeros(3, jnp.int32),
            1.0,
            TypeError,
            "astype",
            id="bound_of_other_dtype",
        ),
    ],
)
def test_clip_by_value_bad_input(t, lo, hi, error, match) -> None:
    with pytest.raises(error, match=r"fg\.clip_by_value.*" + match):
        fg.clip_by_value(t, lo, hi)


# --- clip_by_norm -----------------------------------------------------------------------


def _np_clip_by_norm(t, c, axes=None):
    axes = tuple(axes) if isinstance(axes, list) else axes
    norm = np.sqrt(np.sum(np.square(t, dtype=np.float64), axis=axes, keepdims=True))
    return t * c / np.maximum(norm, c)


@pytest.mark.parametrize("axes", [None, 0, [1], (0, 1), -1], ids=str)
@pytest.mark.parametrize("clip_norm", [0.5, 1e3], ids=["clipped", "unclipped"])
def test_clip_by_norm_closed_form(axes, clip_norm) -> None:
    t = _normal(3, 4)
    got = fg.clip_by_norm(t, clip_norm, axes=axes)
    np.testing.assert_allclose(got, _np_clip_by_norm(np.asarray(t), clip_norm, axes), rtol=1e-6)


def test_clip_by_norm_finite_differences() -> None:
    check_grads(jax.jit(fg.clip_by_norm), (_normal(5), jnp.float32(0.7)), order=2)
    check_grads(jax.jit(lambda t: fg.clip_by_norm(t, 1.0, axes=1)), (_normal(2, 3),), order=1)


def test_clip_by_norm_at_the_tie_differentiates_the_clipped_branch() -> None:
    # ||t|| == clip_norm: TensorFlow's maximum sends the gradient to the norm, so the
    # Jacobian is that of c * t / ||t||, not the identity (JAX would split the tie).
    t = jnp.array([3.0, 4.0])
    jac = jax.jacobian(lambda t: fg.clip_by_norm(t, 5.0))(t)
    expected = np.eye(2) - np.outer(t, t) / 25.0
    np.testing.assert_allclose(jac, expected, atol=1e-7)


def test_clip_by_norm_of_zeros_is_zero_with_identity_gradient() -> None:
    z = jnp.zeros(3)
    assert fg.clip_by_norm(z, 1.0).tolist() == [0.0, 0.0, 0.0]
    np.testing.assert_array_equal(jax.jacobian(lambda z: fg.clip_by_norm(z, 1.0))(z), np.eye(3))


def test_clip_by_norm_nan_and_inf() -> None:
    assert np.isnan(fg.clip_by_norm(jnp.array([3.0, jnp.nan]), 1.0)).all()
    np.testing.assert_array_equal(
        fg.clip_by_norm(jnp.array([3.0, jnp.inf, 4.0]), 1.0), [0.0, np.nan, 0.0]
    )


def test_clip_by_norm_traced_negative_clip_norm_counts_as_zero() -> None:
    got = jax.jit(fg.clip_by_norm)(jnp.array([3.0, 4.0]), jnp.float32(-2.0))
    assert got.tolist() == [0.0, 0.0]


def test_clip_by_norm_under_vmap_clips_each_row() -> None:
    t = _normal(4, 3)
    got = jax.jit(jax.vmap(lambda r: fg.clip_by_norm(r, 0.5)))(t)
    np.testing.assert_allclose(got, _np_clip_by_norm(np.asarray(t), 0.5, axes=1), rtol=1e-6)


_BAD_CLIP_NORMS = [
    pytest.param(-1.0, ValueError, "finite and >= 0", id="negative"),
    pytest.param(float("inf"), ValueError, "finite and >= 0", id="inf"),
    pytest.param(np.float32("nan"), ValueError, "finite and >= 0", id="nan"),
    pytest.param(jnp.ones(2), ValueError, "must be a scalar", id="not_scalar"),
]


@pytest.mark.parametrize(("clip_norm", "error", "match"), _BAD_CLIP_NORMS)
def test_clip_by_norm_bad_clip_norm(clip_norm, error, match) -> None:
    with pytest.raises(error, match=r"fg\.clip_by_norm.*" + match):
        fg.clip_by_norm(jnp.ones(3), clip_norm)


@pytest.mark.parametrize(
    ("t", "axes", "error", "match"),
    [
        pytest.param(jnp.arange(3), None, TypeError, "floating dtype", id="int_t"),
        pytest.param(jnp.ones((2, 3)), 2, ValueError, "distinct axes", id="axis_out_of_range"),
        pytest.param(jnp.ones((2, 3)), [0, -2], ValueError, "distinct axes", id="axis_twice"),
        pytest.param(jnp.ones((2, 3)), [0.5], TypeError, "sequence of ints", id="float_axis"),
    ],
)
def test_clip_by_norm_bad_t_or_axes(t, axes, error, match) -> None:
    with pytest.raises(error, match=r"fg\.clip_by_norm.*" + match):
        fg.clip_by_norm(t, 1.0, axes=axes)


# --- global_norm and clip_by_global_norm -----------------------------------------------


def test_global_norm_is_the_norm_of_everything_together() -> None:
    t_list = [_normal(3, 2), None, _normal(4)]
    expected = np.linalg.norm(np.concatenate([np.ravel(t_list[0]), np.ravel(t_list[2])]))
    np.testing.assert_allclose(fg.global_norm(t_list), expected, rtol=1e-6)
    np.testing.assert_allclose(fg.global_norm(tuple(t_list)), expected, rtol=1e-6)


def test_global_norm_gradient_is_t_over_norm() -> None:
    a, b = _normal(3), _normal(2)
    ga, gb = jax.grad(lambda a, b: fg.global_norm([a, b]), argnums=(0, 1))(a, b)
    norm = np.sqrt(np.sum(np.square(a)) + np.sum(np.square(b)))
    np.testing.assert_allclose(ga, a / norm, rtol=1e-6)
    np.testing.assert_allclose(gb, b / norm, rtol=1e-6)
    check_grads(jax.jit(lambda a, b: fg.global_norm([a, b])), (a, b), order=1)


def test_global_norm_of_nothing_is_float32_zero() -> None:
    for t_list in ([], [None, None]):
        norm = fg.global_norm(t_list)
        assert norm.dtype == jnp.float32 and float(norm) == 0.0


def _np_clip_by_global_norm(t_list, c):
    norm = np.sqrt(sum(np.sum(np.square(t)) for t in t_list if t is not None))
    return [None if t is None else t * c / max(norm, c) for t in t_list], norm


@pytest.mark.parametrize("clip_norm", [0.5, 1e3], ids=["clipped", "unclipped"])
def test_clip_by_global_norm_closed_form_with_none_entries(clip_norm) -> None:
    t_list = [_normal(2, 2), None, _normal(3)]
    clipped, norm = jax.jit(fg.clip_by_global_norm)(t_list, clip_norm)
    expected, expected_norm = _np_clip_by_global_norm(
        [np.asarray(t) if t is not None else None for t in t_list], clip_norm
    )
    assert clipped[1] is None
    np.testing.assert_allclose(norm, expected_norm, rtol=1e-6)
    for got, want in ((clipped[0], expected[0]), (clipped[2], expected[2])):
        np.testing.assert_allclose(got, want, rtol=1e-6)


def test_clip_by_global_norm_finite_differences() -> None:
    def first(a, b, c):
        clipped, _ = fg.clip_by_global_norm([a, b], c)
        return clipped[0] * 2.0 + jnp.sum(clipped[1])

    check_grads(jax.jit(first), (_normal(3), _normal(2), jnp.float32(0.8)), order=1)


def test_clip_by_global_norm_use_norm_replaces_the_norm() -> None:
    t = jnp.array([3.0, 4.0])
    (clipped,), norm = fg.clip_by_global_norm([t], 1.0, use_norm=10.0)
    assert float(norm) == 10.0
    np.testing.assert_allclose(clipped, t / 10.0, rtol=1e-7)


@pytest.mark.parametrize("bad", [jnp.inf, jnp.nan], ids=["inf", "nan"])
def test_clip_by_global_norm_non_finite_norm_gives_nan_everywhere(bad) -> None:
    clipped, norm = fg.clip_by_global_norm([jnp.array([1.0, bad]), jnp.ones(2)], 1.0)
    assert all(np.isnan(c).all() for c in clipped)
    assert np.isnan(norm) or np.isinf(norm)


def test_clip_by_global_norm_of_zeros_is_unchanged() -> None:
    clipped, norm = fg.clip_by_global_norm([jnp.zeros(2), jnp.zeros(3)], 1.0)
    assert float(norm) == 0.0 and all(float(jnp.abs(c).sum()) == 0.0 for c in clipped)


def test_clip_by_global_norm_vmapped_clips_each_example_and_traces_once() -> None:
    @jax.jit
    @chex.assert_max_traces(n=1)
    def per_example(a, b):
        return jax.vmap(lambda a, b: fg.clip_by_global_norm([a, None, b], 1.0))(a, b)

    chex.clear_trace_counter()
    for _ in range(3):
        a, b = _normal(4, 3), _normal(4, 2)
        (ca, none, cb), norms = per_example(a, b)
        assert none is None
        for i in range(4):
            expected, norm = _np_clip_by_global_norm([np.asarray(a[i]), np.asarray(b[i])], 1.0)
            np.testing.assert_allclose(norms[i], norm, rtol=1e-6)
            np.testing.assert_allclose(ca[i], expected[0], rtol=1e-6)
            np.testing.assert_allclose(cb[i], expected[1], rtol=1e-6)


@pytest.mark.parametrize(
    ("t_list", "kwargs", "error", "match"),
    [
        pytest.param({"w": jnp.ones(2)}, {}, TypeError, "list or tuple", id="dict"),
        pytest.param(jnp.ones(2), {}, TypeError, "list or tuple", id="bare_array"),
        pytest.param(
            [jnp.ones(2), jnp.ones(2, jnp.bfloat16)],
            {},
            TypeError,
            "one floating dtype",
            id="mixed_dtypes",
        ),
        pytest.param([jnp.arange(2)], {}, TypeError, "one floating dtype", id="integers"),
        pytest.param(
            [jnp.ones(2)],
            {"use_norm": jnp.ones(2)},
            ValueError,
            "use_norm must be a scalar",
            id="use_norm_not_scalar",
        ),
    ],
)
def test_clip_by_global_norm_bad_t_list(t_list, kwargs, error, match) -> None:
    with pytest.raises(error, match=r"fg\.clip_by_global_norm.*" + match):
        fg.clip_by_global_norm(t_list, 1.0, **kwargs)
    if "use_norm" not in kwargs:
        with pytest.raises(error, match=r"fg\.global_norm.*" + match):
            fg.global_norm(t_list)


@pytest.mark.parametrize(("clip_norm", "error", "match"), _BAD_CLIP_NORMS)
def test_clip_by_global_norm_bad_clip_norm(clip_norm, error, match) -> None:
    with pytest.raises(error, match=r"fg\.clip_by_global_norm.*" + match):
        fg.clip_by_global_norm([jnp.ones(3)], clip_norm)


# --- clip_by_average_norm ---------------------------------------------------------------


@pytest.mark.parametrize("clip_norm", [0.1, 1e3], ids=["clipped", "unclipped"])
def test_clip_by_average_norm_closed_form(clip_norm) -> None:
    t = _normal(3, 4)
    average = np.linalg.norm(t) / t.size
    expected = np.asarray(t) * clip_norm / max(average, clip_norm)
    np.testing.assert_allclose(fg.clip_by_average_norm(t, clip_norm), expected, rtol=1e-6)


def test_clip_by_average_norm_gradients() -> None:
    check_grads(jax.jit(fg.clip_by_average_norm), (_normal(4), jnp.float32(0.1)), order=1)
    z = jnp.zeros(3)
    np.testing.assert_array_equal(
        jax.jacobian(lambda z: fg.clip_by_average_norm(z, 1.0))(z), np.eye(3)
    )


def test_clip_by_average_norm_under_jit_and_vmap() -> None:
    t = _normal(5, 4)
    got = jax.jit(jax.vmap(fg.clip_by_average_norm, in_axes=(0, None)))(t, jnp.float32(0.1))
    for row, out in zip(t, got, strict=True):
        np.testing.assert_allclose(out, fg.clip_by_average_norm(row, 0.1), rtol=1e-6)
    assert np.isnan(fg.clip_by_average_norm(jnp.array([1.0, jnp.nan]), 1.0)).all()


@pytest.mark.parametrize(("clip_norm", "error", "match"), _BAD_CLIP_NORMS)
def test_clip_by_average_norm_bad_clip_norm(clip_norm, error, match) -> None:
    with pytest.raises(error, match=r"fg\.clip_by_average_norm.*" + match):
        fg.clip_by_average_norm(jnp.ones(3), clip_norm)


def test_clip_by_average_norm_rejects_integers() -> None:
    with pytest.raises(TypeError, match=r"fg\.clip_by_average_norm.*floating dtype"):
        fg.clip_by_average_norm(jnp.arange(3), 1.0)


# --- IndexedSlices: the norm of the values, duplicates included, indices kept ---------

_ROWS = np.array([[3.0, 0.0], [3.0, 0.0], [1.0, 2.0]], np.float32)
_IDS = np.array([1, 1, 4], np.int32)


def _sparse() -> fg.IndexedSlices:
    return fg.IndexedSlices(jnp.asarray(_ROWS), jnp.asarray(_IDS), (5, 2))


def test_global_norm_of_indexed_slices_is_the_norm_of_its_values() -> None:
    dense = np.array([4.0], np.float32)
    expected = np.sqrt(np.sum(_ROWS.astype(np.float64) ** 2) + 16.0)
    got = fg.global_norm([_sparse(), jnp.asarray(dense)])
    np.testing.assert_allclose(float(got), expected, rtol=1e-6)
    # with the duplicate id summed, the dense gradient's norm differs: TF counts rows
    assert abs(float(fg.global_norm([_sparse().to_dense(), dense])) - expected) > 0.5


def test_clip_by_global_norm_scales_values_and_keeps_indices() -> None:
    dense = jnp.array([4.0])
    clipped, norm = jax.jit(lambda t: fg.clip_by_global_norm(t, 1.0))([_sparse(), None, dense])
    expected_norm = np.sqrt(np.sum(_ROWS.astype(np.float64) ** 2) + 16.0)
    np.testing.assert_allclose(float(norm), expected_norm, rtol=1e-6)
    assert isinstance(clipped[0], fg.IndexedSlices) and clipped[1] is None
    np.testing.assert_array_equal(clipped[0].indices, _IDS)
    assert clipped[0].dense_shape == (5, 2)
    np.testing.assert_allclose(clipped[0].values, _ROWS / expected_norm, rtol=1e-6)
    np.testing.assert_allclose(clipped[2], np.array([4.0]) / expected_norm, rtol=1e-6)


def test_clip_by_norm_of_indexed_slices() -> None:
    clipped = fg.clip_by_norm(_sparse(), 2.0)
    assert isinstance(clipped, fg.IndexedSlices)
    np.testing.assert_array_equal(clipped.indices, _IDS)
    np.testing.assert_allclose(
        clipped.values, _ROWS * 2.0 / np.linalg.norm(_ROWS.astype(np.float64)), rtol=1e-6
    )
    per_row = fg.clip_by_norm(_sparse(), 2.0, axes=1)
    row_norms = np.linalg.norm(_ROWS.astype(np.float64), axis=1, keepdims=True)
    np.testing.assert_allclose(per_row.values, _ROWS * 2.0 / np.maximum(row_norms, 2.0), rtol=1e-6)


def test_clip_of_indexed_slices_with_integer_values_is_refused() -> None:
    s = fg.IndexedSlices(jnp.array([[1, 2]]), jnp.array([0]), (3, 2))
    with pytest.raises(TypeError, match=r"t has dtype int32.*astype\(jnp.float32\)"):
        fg.clip_by_norm(s, 1.0)
