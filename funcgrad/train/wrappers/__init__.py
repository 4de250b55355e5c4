"""Wrappers around an optimizer or its optax transformation, each a separate concept.

* ``accumulate``: gradient accumulation over k micro-batches.
* ``finite``: skipping a step whose gradients are not finite, counting the skips.
* ``parallel``: data-parallel steps over a ``jax.sharding.Mesh``.
* ``loss_scale``: ``LossScaleOptimizer``, TensorFlow 1.x's (dynamic) loss scaling.
"""

from funcgrad.train.wrappers.accumulate import AccumulateGradientsState
from funcgrad.train.wrappers.accumulate import accumulate_gradients
from funcgrad.train.wrappers.accumulate import minimize_in_microbatches
from funcgrad.train.wrappers.finite import SkippedSteps
from funcgrad.train.wrappers.finite import skip_nonfinite
from funcgrad.train.wrappers.finite import skipped_steps
from funcgrad.train.wrappers.loss_scale import LossScaleOptimizer
from funcgrad.train.wrappers.loss_scale import LossScaleState
from funcgrad.train.wrappers.parallel import data_parallel
from funcgrad.train.wrappers.parallel import shard_map_minimize

__all__ = [
    "AccumulateGradientsState",
    "LossScaleOptimizer",
    "LossScaleState",
    "SkippedSteps",
    "accumulate_gradients",
    "data_parallel",
    "minimize_in_microbatches",
    "shard_map_minimize",
    "skip_nonfinite",
    "skipped_steps",
]
