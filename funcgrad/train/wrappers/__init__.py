"""Wrappers around an optimizer or its optax transformation, each a separate concept.

Around an ``fg.train`` optimizer, on one small base (``_wrapper``: the wrapped
optimizer's state inside the wrapper's, every step's hook delegated, a call's options
passed on):

* ``loss_scale``: ``LossScaleOptimizer``, TensorFlow 1.x's (dynamic) loss scaling.
* ``moving_average_optimizer``: ``tf.contrib.opt``'s ``MovingAverageOptimizer``, moving
  averages of the variables the wrapped optimizer trains.
* ``processing``: ``optimize_loss`` (``tf.contrib.layers.optimize_loss``), an optimizer
  that processes its gradients (noise, multipliers, clipping) before each apply.

Around an optax transformation (or an optimizer's ``.tx``), or a step:

* ``accumulate``: gradient accumulation over k micro-batches.
* ``finite``: skipping a step whose gradients are not finite, counting the skips.
* ``parallel``: data-parallel steps over a ``jax.sharding.Mesh``.
"""

from funcgrad.train.wrappers import accumulate
from funcgrad.train.wrappers import finite
from funcgrad.train.wrappers import loss_scale
from funcgrad.train.wrappers import moving_average_optimizer
from funcgrad.train.wrappers import parallel
from funcgrad.train.wrappers import processing
from funcgrad.train.wrappers.accumulate import AccumulateGradientsState as AccumulateGradientsState
from funcgrad.train.wrappers.accumulate import accumulate_gradients as accumulate_gradients
from funcgrad.train.wrappers.accumulate import minimize_in_microbatches as minimize_in_microbatches
from funcgrad.train.wrappers.finite import SkippedSteps as SkippedSteps
from funcgrad.train.wrappers.finite import skip_nonfinite as skip_nonfinite
from funcgrad.train.wrappers.finite import skipped_steps as skipped_steps
from funcgrad.train.wrappers.loss_scale import LossScaleOptimizer as LossScaleOptimizer
from funcgrad.train.wrappers.loss_scale import LossScaleState as LossScaleState
from funcgrad.train.wrappers.moving_average_optimizer import (
    MovingAverageOptimizer as MovingAverageOptimizer,
)
from funcgrad.train.wrappers.moving_average_optimizer import (
    MovingAverageState as MovingAverageState,
)
from funcgrad.train.wrappers.parallel import data_parallel as data_parallel
from funcgrad.train.wrappers.parallel import shard_map_minimize as shard_map_minimize
from funcgrad.train.wrappers.processing import optimize_loss as optimize_loss

__all__ = (
    accumulate.__all__
    + finite.__all__
    + loss_scale.__all__
    + moving_average_optimizer.__all__
    + parallel.__all__
    + processing.__all__
)
