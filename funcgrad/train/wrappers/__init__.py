"""Wrappers around an optimizer or its optax transformation, each a separate concept.

* ``accumulate``: gradient accumulation over k micro-batches.
* ``finite``: skipping a step whose gradients are not finite, counting the skips.
* ``parallel``: data-parallel steps over a ``jax.sharding.Mesh``.
* ``loss_scale``: ``LossScaleOptimizer``, TensorFlow 1.x's (dynamic) loss scaling.
"""

from funcgrad.train.wrappers import accumulate
from funcgrad.train.wrappers import finite
from funcgrad.train.wrappers import loss_scale
from funcgrad.train.wrappers import parallel
from funcgrad.train.wrappers.accumulate import AccumulateGradientsState as AccumulateGradientsState
from funcgrad.train.wrappers.accumulate import accumulate_gradients as accumulate_gradients
from funcgrad.train.wrappers.accumulate import minimize_in_microbatches as minimize_in_microbatches
from funcgrad.train.wrappers.finite import SkippedSteps as SkippedSteps
from funcgrad.train.wrappers.finite import skip_nonfinite as skip_nonfinite
from funcgrad.train.wrappers.finite import skipped_steps as skipped_steps
from funcgrad.train.wrappers.loss_scale import LossScaleOptimizer as LossScaleOptimizer
from funcgrad.train.wrappers.loss_scale import LossScaleState as LossScaleState
from funcgrad.train.wrappers.parallel import data_parallel as data_parallel
from funcgrad.train.wrappers.parallel import shard_map_minimize as shard_map_minimize

__all__ = accumulate.__all__ + finite.__all__ + loss_scale.__all__ + parallel.__all__
