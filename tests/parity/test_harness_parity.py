"""The parity harness itself: TensorFlow's tf.gradients tutorial example through run_tf1."""

import numpy as np

import funcgrad as fg


def test_tf_gradients_tutorial_example_matches_funcgrad(tf, run_tf1) -> None:
    def build():
        w1 = tf.Variable([1.0, 2.0, 3.0])
        w2 = tf.Variable([4.0, 5.0, 6.0])
        return tf.compat.v1.gradients([3.0 * w1 + w2, w1 * w2], [w1, w2])

    expected = run_tf1(build)
    got = fg.gradients(
        lambda w1, w2: [3.0 * w1 + w2, w1 * w2],
        [np.array([1.0, 2.0, 3.0], np.float32), np.array([4.0, 5.0, 6.0], np.float32)],
    )
    for e, g in zip(expected, got, strict=True):
        np.testing.assert_allclose(g, e, rtol=1e-6)
