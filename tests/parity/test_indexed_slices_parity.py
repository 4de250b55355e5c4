"""IndexedSlices gradients against TensorFlow 2.21's tf.gradients, in graph mode.

Where ``tf.gradients`` gives an ``IndexedSlices`` (``tf.gather``,
``tf.nn.embedding_lookup``), ``compute_gradients`` of the same model written with
``jnp.take`` / ``E[ids]`` gives one with the same indices (in the same order) and the same
values; where TensorFlow's gradient is dense (a table also read by a matmul, a gather of
columns), funcgrad's is dense too.
"""

import jax.numpy as jnp
import numpy as np
import pytest

import funcgrad as fg

_RNG = np.random.default_rng(25)
TABLE = _RNG.normal(size=(6, 4)).astype(np.float32)
W = _RNG.normal(size=(4, 3)).astype(np.float32)
IDS = np.array([4, 1, 4, 0, 4], np.int32)  # duplicates; rows 2, 3 and 5 untouched
IDS_2D = np.array([[5, 1], [1, 3]], np.int32)
_EPS32 = float(np.finfo(np.float32).eps)


def _close(ours, theirs):
    """Equal up to float32 rounding: sums of products round at the scale of their
    largest terms, so an entry that cancels to near zero is compared at that scale."""
    theirs = np.asarray(theirs)
    scale = float(np.max(np.abs(theirs)))
    np.testing.assert_allclose(ours, theirs, rtol=2e-5, atol=16 * _EPS32 * scale)


def _tf_gradients(tf, run_tf1, loss_of):
    """``tf.gradients`` of ``loss_of(E, W)`` with respect to the variables E and W."""
    kinds = []

    def build():
        e = tf.compat.v1.Variable(TABLE)
        w = tf.compat.v1.Variable(W)
        grads = tf.compat.v1.gradients(loss_of(e, w), [e, w])
        kinds.extend(type(g).__name__ for g in grads)
        return grads

    values = run_tf1(build)
    return kinds, values


def _fg_gradients(loss_of):
    opt = fg.train.GradientDescentOptimizer(0.1)
    gvs = opt.compute_gradients(lambda p: loss_of(p["e"], p["w"]), {"e": TABLE, "w": W})
    return [g for g, _ in gvs]


def _head_tf(tf, rows, w):
    return tf.reduce_sum(tf.tanh(tf.matmul(rows, w)) ** 2)


def _head_fg(rows, w):
    return jnp.sum(jnp.tanh(rows @ w) ** 2)


def _assert_same_slices(ours, theirs):
    assert isinstance(ours, fg.IndexedSlices)
    np.testing.assert_array_equal(ours.indices, theirs.indices)
    _close(ours.values, theirs.values)
    assert ours.dense_shape == tuple(theirs.dense_shape)


@pytest.mark.parametrize(
    ("tf_lookup", "fg_lookup"),
    [
        pytest.param(
            lambda tf, e, ids: tf.gather(e, ids),
            lambda e, ids: jnp.take(e, ids, axis=0),
            id="gather_take",
        ),
        pytest.param(
            lambda tf, e, ids: tf.nn.embedding_lookup(e, ids),
            lambda e, ids: e[ids],
            id="embedding_lookup_getitem",
        ),
    ],
)
@pytest.mark.parametrize("ids", [IDS, IDS_2D], ids=["ids_1d", "ids_2d"])
def test_lookups_give_tensorflows_indexed_slices(tf, run_tf1, tf_lookup, fg_lookup, ids):
    rows = int(ids.size)
    kinds, (tf_e, tf_w) = _tf_gradients(
        tf, run_tf1, lambda e, w: _head_tf(tf, tf.reshape(tf_lookup(tf, e, ids), [rows, 4]), w)
    )
    fg_e, fg_w = _fg_gradients(lambda e, w: _head_fg(fg_lookup(e, ids).reshape(rows, 4), w))
    assert kinds[0] == "IndexedSlices"
    _assert_same_slices(fg_e, tf_e)
    _close(fg_w, tf_w)


def test_two_lookups_of_one_table_concatenate_as_tensorflow(tf, run_tf1):
    first, second = np.array([5, 0], np.int32), np.array([1, 2, 1], np.int32)

    def tf_loss(e, w):
        return tf.reduce_sum(tf.gather(e, first) ** 2) + _head_tf(
            tf, tf.nn.embedding_lookup(e, second), w
        )

    kinds, (tf_e, _) = _tf_gradients(tf, run_tf1, tf_loss)
    fg_e, _ = _fg_gradients(
        lambda e, w: jnp.sum(e[first] ** 2) + _head_fg(jnp.take(e, second, axis=0), w)
    )
    assert kinds[0] == "IndexedSlices"
    _assert_same_slices(fg_e, tf_e)


def test_a_scalar_id_gives_one_row_as_tensorflow(tf, run_tf1):
    kinds, (tf_e, _) = _tf_gradients(
        tf, run_tf1, lambda e, w: _head_tf(tf, tf.gather(e, 3)[None], w)
    )
    fg_e = fg.gradients(
        lambda e, i: _head_fg(e[i][None], W), [TABLE, jnp.int32(3)], indexed_slices=True
    )[0]
    assert kinds[0] == "IndexedSlices"
    _assert_same_slices(fg_e, tf_e)


@pytest.mark.parametrize(
    ("tf_loss", "fg_loss"),
    [
        pytest.param(
            lambda tf, e, w: _head_tf(tf, tf.gather(e, IDS), w) + tf.reduce_sum(tf.matmul(e, w)),
            lambda e, w: _head_fg(e[IDS], w) + jnp.sum(e @ w),
            id="gather_and_matmul",
        ),
        pytest.param(
            lambda tf, e, w: tf.reduce_sum(tf.gather(e, [0, 2], axis=1) ** 2) + tf.reduce_sum(w),
            lambda e, w: jnp.sum(jnp.take(e, jnp.array([0, 2]), axis=1) ** 2) + jnp.sum(w),
            id="gather_of_columns",
        ),
    ],
)
def test_other_reads_give_a_dense_gradient_as_tensorflow(tf, run_tf1, tf_loss, fg_loss):
    kinds, (tf_e, _) = _tf_gradients(tf, run_tf1, lambda e, w: tf_loss(tf, e, w))
    fg_e, _ = _fg_gradients(fg_loss)
    assert kinds[0] != "IndexedSlices"
    assert not isinstance(fg_e, fg.IndexedSlices)
    _close(fg_e, tf_e)


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_a_table_cast_then_gathered_keeps_tensorflows_indexed_slices(tf, run_tf1, dtype):
    # Cast's gradient casts an IndexedSlices' values back to the table's dtype (TF's
    # mixed-precision reads); a cast also used densely gives a dense gradient.
    def tf_rows(e):
        return tf.cast(tf.gather(tf.cast(e, dtype), IDS), tf.float32)

    kinds, (tf_e, _) = _tf_gradients(tf, run_tf1, lambda e, w: _head_tf(tf, tf_rows(e), w))
    fg_e, _ = _fg_gradients(lambda e, w: _head_fg(e.astype(dtype)[IDS].astype(jnp.float32), w))
    assert kinds[0] == "IndexedSlices"
    assert isinstance(fg_e, fg.IndexedSlices)
    assert fg_e.values.dtype == tf_e.values.dtype == np.float32
    np.testing.assert_array_equal(fg_e.indices, tf_e.indices)
    # one rounding to the cast dtype of nearly equal float32 numbers: at most one ulp of it
    np.testing.assert_allclose(fg_e.values, tf_e.values, rtol=2 * float(jnp.finfo(dtype).eps))

    def tf_dense(e, w):
        c = tf.cast(e, dtype)
        return _head_tf(tf, tf.cast(tf.gather(c, IDS), tf.float32), w) + tf.reduce_sum(
            tf.cast(c, tf.float32)
        )

    kinds, (tf_e, _) = _tf_gradients(tf, run_tf1, tf_dense)
    fg_e, _ = _fg_gradients(
        lambda e, w: (
            _head_fg(e.astype(dtype)[IDS].astype(jnp.float32), w)
            + jnp.sum(e.astype(dtype).astype(jnp.float32))
        )
    )
    assert kinds[0] != "IndexedSlices"
    assert not isinstance(fg_e, fg.IndexedSlices)
    np.testing.assert_allclose(fg_e, tf_e, rtol=2 * float(jnp.finfo(dtype).eps))


def test_clip_by_global_norm_of_indexed_slices_with_duplicates(tf, run_tf1):
    """The norm counts each duplicate row (not the summed dense rows), as TensorFlow."""

    def build():
        e = tf.compat.v1.Variable(TABLE)
        w = tf.compat.v1.Variable(W)
        grads = tf.compat.v1.gradients(_head_tf(tf, tf.gather(e, IDS), w), [e, w])
        clipped, norm = tf.clip_by_global_norm(grads, 0.5)
        return clipped, norm, tf.linalg.global_norm([tf.convert_to_tensor(grads[0]), grads[1]])

    (tf_e, tf_w), tf_norm, tf_dense_norm = run_tf1(build)
    grads = _fg_gradients(lambda e, w: _head_fg(e[IDS], w))
    (fg_e, fg_w), fg_norm = fg.clip_by_global_norm(grads, 0.5)
    _close(float(fg_norm), tf_norm)
    assert abs(tf_norm - tf_dense_norm) > 1e-3  # the duplicates make the two norms differ
    assert tf_norm > 0.5  # the clip is active
    _assert_same_slices(fg_e, tf_e)
    _close(fg_w, tf_w)
