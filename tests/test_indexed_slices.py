"""fg.IndexedSlices: the pytree, its dense array, and what TensorFlow code does with one."""

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import funcgrad as fg

VALUES = np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]], np.float32)
IDS = np.array([3, 0, 3], np.int32)


def _dense_reference(values, ids, shape):
    """The dense array by NumPy's unbuffered add (duplicates summed)."""
    out = np.zeros(shape, values.dtype)
    np.add.at(out, ids, values)
    return out


def _slices():
    return fg.IndexedSlices(jnp.asarray(VALUES), jnp.asarray(IDS), (5, 2))


def test_fields_and_properties_are_tensorflows():
    s = _slices()
    np.testing.assert_array_equal(s.values, VALUES)
    np.testing.assert_array_equal(s.indices, IDS)
    assert s.dense_shape == (5, 2)
    assert s.shape == (5, 2)
    assert s.dtype == np.float32


def test_to_dense_sums_duplicates():
    np.testing.assert_array_equal(_slices().to_dense(), _dense_reference(VALUES, IDS, (5, 2)))


def test_conversion_to_an_array_is_to_dense():
    expected = _dense_reference(VALUES, IDS, (5, 2))
    np.testing.assert_array_equal(jnp.asarray(_slices()), expected)
    np.testing.assert_array_equal(np.asarray(_slices()), expected)


def test_to_dense_drops_out_of_range_rows():
    s = fg.IndexedSlices(jnp.ones((3, 2)), jnp.array([0, 5, -1]), (5, 2))
    expected = np.zeros((5, 2), np.float32)
    expected[0] = 1.0
    np.testing.assert_array_equal(s.to_dense(), expected)


@pytest.mark.parametrize(
    ("op", "factor"),
    [
        pytest.param(lambda s: 0.5 * s, 0.5, id="left_scale"),
        pytest.param(lambda s: s * 0.5, 0.5, id="right_scale"),
        pytest.param(lambda s: s / 2, 0.5, id="divide"),
        pytest.param(lambda s: -s, -1.0, id="negate"),
        pytest.param(lambda s: s * jnp.float32(3.0), 3.0, id="array_scalar"),
    ],
)
def test_scaling_keeps_the_indices(op, factor):
    out = op(_slices())
    assert isinstance(out, fg.IndexedSlices)
    np.testing.assert_array_equal(out.indices, IDS)
    np.testing.assert_allclose(out.values, VALUES * factor)
    assert out.dense_shape == (5, 2)


def test_is_a_pytree_through_jit_and_tree_map():
    s = _slices()
    leaves, treedef = jax.tree.flatten(s)
    assert len(leaves) == 2
    back = jax.tree.unflatten(treedef, leaves)
    assert back.dense_shape == (5, 2)
    out = jax.jit(lambda s: 2.0 * s)(s)
    np.testing.assert_array_equal(out.values, 2.0 * VALUES)
    np.testing.assert_array_equal(out.indices, IDS)
    dense = jax.jit(lambda s: s.to_dense())(s)
    np.testing.assert_array_equal(dense, _dense_reference(VALUES, IDS, (5, 2)))


def test_works_under_vmap():
    batch = np.stack([VALUES, 10 * VALUES])

    def dense_of(values):
        return fg.IndexedSlices(values, jnp.asarray(IDS), (5, 2)).to_dense()

    out = jax.vmap(dense_of)(jnp.asarray(batch))
    for b in range(2):
        np.testing.assert_array_equal(out[b], _dense_reference(batch[b], IDS, (5, 2)))


def test_traces_once_under_jit():
    @jax.jit
    @chex.assert_max_traces(n=1)
    def scaled(s):
        return (0.5 * s).to_dense()

    scaled(_slices())
    scaled(fg.IndexedSlices(jnp.zeros((3, 2)), jnp.array([1, 1, 1]), (5, 2)))


@pytest.mark.parametrize(
    ("args", "error", "match"),
    [
        pytest.param(
            (VALUES, IDS.astype(np.float32), (5, 2)),
            TypeError,
            r"indices has dtype float32.*cast them",
            id="float_indices",
        ),
        pytest.param(
            (VALUES, IDS, (5, 3)),
            ValueError,
            r"values has shape \(3, 2\).*must be \(3, 3\).*one row of values per index",
            id="row_shape",
        ),
        pytest.param(
            (VALUES, IDS[:2], (5, 2)),
            ValueError,
            r"with \(2,\) indices.*one row of values per index",
            id="count",
        ),
        pytest.param(
            (VALUES, IDS.reshape(3, 1), (5, 2)),
            ValueError,
            r"indices has shape \(3, 1\), not \(n,\)",
            id="indices_rank",
        ),
        pytest.param(
            (VALUES, IDS, (5.0, 2)), TypeError, r"dense_shape must be a tuple of ints", id="shape"
        ),
        pytest.param(
            (VALUES, IDS, (-5, 2)),
            ValueError,
            r"dense_shape \(-5, 2\) has a negative size; pass the table's shape, e.g. table",
            id="negative_shape",
        ),
        pytest.param(
            ("rows", IDS, (5, 2)), TypeError, r"values must be an array, got str", id="values"
        ),
    ],
)
def test_bad_construction(args, error, match):
    with pytest.raises(error, match=match):
        fg.IndexedSlices(*args)


def test_adding_two_is_refused_with_the_fix():
    with pytest.raises(TypeError, match=r"no \+; use the dense arrays \(s.to_dense\(\) \+"):
        _ = _slices() + _slices()
    with pytest.raises(TypeError, match=r"IndexedSlices - int.*to_dense"):
        _ = _slices() - 1


def test_scaling_by_an_array_is_refused_with_the_fix():
    with pytest.raises(TypeError, match=r"only a scalar scales.*s.to_dense\(\) \* x"):
        _ = _slices() * jnp.ones((3, 2))
