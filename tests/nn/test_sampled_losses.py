"""fg.nn's sampled losses: the output layer keeps its IndexedSlices; their bad inputs.
The numbers themselves are TensorFlow's in tests/parity/test_nn_parity.py."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import funcgrad as fg
from tests.nn._helpers import DRAWN
from tests.nn._helpers import LABELS
from tests.nn._helpers import TABLE
from tests.nn._helpers import B
from tests.nn._helpers import X
from tests.nn._helpers import mod_shards


@pytest.mark.parametrize("loss_fn", [fg.nn.nce_loss, fg.nn.sampled_softmax_loss])
def test_sampled_losses_keep_the_indexed_slices(loss_fn):
    params = {"w": mod_shards(TABLE, 2), "b": jnp.zeros(10), "x": jnp.ones((2, 3))}
    labels = jnp.array([[1], [8]])

    def loss(p, key):
        return jnp.sum(loss_fn(p["w"], p["b"], labels, p["x"], 4, 10, key=key))

    gvs = fg.train.GradientDescentOptimizer(0.1).compute_gradients(loss, params, jax.random.key(3))
    kinds = [type(g).__name__ for g, _ in gvs]
    assert kinds == ["IndexedSlices", "IndexedSlices", "IndexedSlices", "ArrayImpl"]  # b, w, x
    sampled, _, _ = fg.nn.log_uniform_candidate_sampler(
        labels, 1, 4, True, 10, key=jax.random.key(3)
    )
    assert set(np.asarray(gvs[0][0].indices).tolist()) == {1, 8, *np.asarray(sampled).tolist()}


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        pytest.param(
            lambda: fg.nn.nce_loss(TABLE, B, LABELS, X, 2, 10),
            TypeError, r"no key given; .* pass key=jax.random.key\(0\)", id="nce_no_key",
        ),
        pytest.param(
            lambda: fg.nn.sampled_softmax_loss(TABLE, B, LABELS, X, 3, 10, sampled_values=DRAWN),
            ValueError, r"sampled_values has shapes .* need \(\(3,\), \(2, 1\), \(3,\)\)",
            id="sampled_values_shapes",
        ),
        pytest.param(
            lambda: fg.nn.nce_loss(TABLE, B, LABELS, X, 2, 10, sampled_values=3),
            TypeError, "sampled_values must be the sampler's triple", id="sampled_values_type",
        ),
        pytest.param(
            lambda: fg.nn.nce_loss(TABLE, B, LABELS, X, 2, 10,
                                   sampled_values=(DRAWN[0], DRAWN[1].astype(int), DRAWN[2])),
            TypeError, r"sampled_values\[1\] \(an expected count\) has dtype int32; pass",
            id="integer_expected_counts",
        ),
        pytest.param(
            lambda: fg.nn.nce_loss(TABLE, jnp.zeros(9), LABELS, X, 2, 10, sampled_values=DRAWN),
            ValueError, "biases has 9 rows, weights 10", id="biases_rows",
        ),
    ],
)  # fmt: skip
def test_bad_inputs(call, error, match):
    with pytest.raises(error, match=match):
        call()


@pytest.mark.parametrize("loss", [fg.nn.nce_loss, fg.nn.sampled_softmax_loss])
def test_an_output_layer_of_the_wrong_shape_is_named_with_the_fix(loss):
    """They were JAX's concatenate and reshape errors."""
    with pytest.raises(
        ValueError,
        match=r"biases has rows of shape \(1,\), not \(\); inputs has shape \(2, 4\), "
        r"not \(batch, 3\); pass weights \(num_classes, dim\) and biases \(num_classes,\)",
    ):
        loss(TABLE, jnp.zeros((10, 1)), LABELS, jnp.ones((2, 4)), 2, 10, sampled_values=DRAWN)
