"""Partitioned variables (tf.compat.v1.fixed_size_partitioner) in TF 2.21 Saver checkpoints,
both ways: TensorFlow's slices restore into one array (slots too) and training goes on
with TensorFlow's numbers; funcgrad's partitioned save restores in TensorFlow's graph and
is byte for byte what TensorFlow's Saver writes for the same values."""

import jax.numpy as jnp
import numpy as np
import pytest

import funcgrad as fg

IDS = [1, 5, 9, 150]
SHAPES = {"W": ((10, 3), 3), "big": ((200, 2), 4)}  # 200 rows: two-byte slice offsets


def _graph(tf):
    tf1 = tf.compat.v1
    tables = [
        tf1.get_variable(
            name,
            shape=shape,
            initializer=tf1.random_normal_initializer(seed=i),
            partitioner=tf1.fixed_size_partitioner(parts),
        )
        for i, (name, (shape, parts)) in enumerate(SHAPES.items())
    ]
    # TF1's embedding_lookup reads a partitioned variable "mod", TF2's "div".
    loss = tf.reduce_sum(tf1.nn.embedding_lookup(tables[0], IDS[:3]) ** 2)
    loss += tf.reduce_sum(tf.nn.embedding_lookup(tables[1], IDS) ** 2)
    step = tf1.train.get_or_create_global_step()
    train = tf1.train.AdamOptimizer(0.1).minimize(loss, global_step=step)
    whole = {t.name.split("/")[0]: tf.concat(list(t), 0) for t in tables}
    return train, tf1.train.Saver(), whole


def _loss(p):
    parts = jnp.split(p["W"], [4, 7])  # the restored array is the parts one after the other
    w = fg.nn.embedding_lookup(parts, jnp.array(IDS[:3]), "mod")
    return jnp.sum(w**2) + jnp.sum(p["big"][jnp.array(IDS)] ** 2)


OPT = fg.train.AdamOptimizer(0.1)
TEMPLATE = {name: jnp.zeros(shape) for name, (shape, _) in SHAPES.items()}
PARTS = {name: parts for name, (_, parts) in SHAPES.items()}


def _run_tf(tf, prefix, steps, restore=None):
    """Train ``steps`` steps in TensorFlow's graph (from ``restore``, if given), save at
    ``prefix``; the tables after each step."""
    with tf.Graph().as_default():
        train, saver, whole = _graph(tf)
        with tf.compat.v1.Session() as sess:
            sess.run(tf.compat.v1.global_variables_initializer())
            if restore:
                saver.restore(sess, restore)
            seen = [sess.run(whole)]
            for _ in range(steps):
                sess.run(train)
                seen.append(sess.run(whole))
            saver.save(sess, prefix)
    return seen


def test_tensorflows_slices_restore_into_one_array_and_training_goes_on(tf, tmp_path):
    seen = _run_tf(tf, str(tmp_path / "tf" / "model.ckpt"), steps=3)
    _run_tf(tf, str(tmp_path / "tf1" / "model.ckpt"), steps=1)
    state = fg.train.restore_tf_checkpoint(
        str(tmp_path / "tf1" / "model.ckpt"), OPT.init(TEMPLATE), OPT
    )
    for name in SHAPES:
        np.testing.assert_array_equal(state.params[name], seen[1][name])
    for step in (2, 3):
        state, _ = OPT.minimize(_loss, state)
        for name in SHAPES:
            np.testing.assert_allclose(state.params[name], seen[step][name], rtol=1e-6, atol=1e-7)
    final = fg.train.restore_tf_checkpoint(
        str(tmp_path / "tf" / "model.ckpt"), OPT.init(TEMPLATE), OPT
    )
    assert int(final.global_step) == 3


def test_a_partitioned_save_is_tensorflows_own(tf, tmp_path):
    # TensorFlow trains 2 steps and saves; funcgrad reads it, saves it partitioned: the same
    # bytes.  TensorFlow restores funcgrad's checkpoint into its partitioned graph.
    tf_prefix, fg_prefix = str(tmp_path / "tf" / "model.ckpt"), str(tmp_path / "fg" / "model.ckpt")
    seen = _run_tf(tf, tf_prefix, steps=2)
    state = fg.train.restore_tf_checkpoint(tf_prefix, OPT.init(TEMPLATE), OPT)
    fg.train.save_tf_checkpoint(fg_prefix, state, OPT, partitions=PARTS)
    for suffix in (".index", ".data-00000-of-00001"):
        with open(tf_prefix + suffix, "rb") as a, open(fg_prefix + suffix, "rb") as b:
            assert a.read() == b.read(), suffix
    after = _run_tf(tf, str(tmp_path / "again" / "model.ckpt"), steps=1, restore=fg_prefix)
    for name in SHAPES:
        np.testing.assert_array_equal(after[0][name], seen[2][name])
    state, _ = OPT.minimize(_loss, state)
    for name in SHAPES:
        np.testing.assert_allclose(state.params[name], after[1][name], rtol=1e-6, atol=1e-7)


def test_a_partitioned_save_restores_unpartitioned_too(tmp_path):
    state = OPT.init({"W": jnp.arange(30.0).reshape(10, 3)})
    prefix = fg.train.save_tf_checkpoint(str(tmp_path / "m.ckpt"), state, OPT, partitions={"W": 4})
    restored = fg.train.restore_tf_checkpoint(prefix, OPT.init({"W": jnp.zeros((10, 3))}), OPT)
    np.testing.assert_array_equal(restored.params["W"], state.params["W"])


@pytest.mark.parametrize(
    ("partitions", "error", "match"),
    [
        ({"V": 2}, ValueError, r"partitions names 'V', which is not saved"),
        ({"W": 11}, ValueError, r"partitions\['W'\] is 11, but 'W' has shape \(10, 3\)"),
        ({"W": 0}, ValueError, r"partitions\['W'\] must be an integer >= 1"),
        ({"W": 2.5}, TypeError, r"partitions\['W'\] must be an integer >= 1"),
    ],
)
def test_bad_partitions(tmp_path, partitions, error, match):
    state = OPT.init({"W": jnp.zeros((10, 3))})
    with pytest.raises(error, match=match):
        fg.train.save_tf_checkpoint(str(tmp_path / "m.ckpt"), state, OPT, partitions=partitions)
