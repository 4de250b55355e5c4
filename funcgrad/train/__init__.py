"""The optimizer shim: TensorFlow 1.x's ``tf.train`` optimizers over optax.

Where each concept lives:

* ``state``: ``TrainState``, the explicit training state.
* ``optimizer``: ``Optimizer`` — ``compute_gradients`` / ``apply_gradients`` /
  ``minimize`` over any optax transformation.
* ``group``: ``OptimizerGroup`` — several optimizers over one set of variables (a
  GAN's D and G), sharing one ``TrainState``.
* ``tf_optimizers``: the nine TF1 optimizers with TensorFlow's update rules.
* ``transforms``: the TF-only update rules as optax transformations.
* ``learning_rate``: scaling by the learning rate, ``set_learning_rate``.
* ``schedules``: TensorFlow's learning-rate decays.
* ``names``: ``variable_names``.
* ``moving_averages``: ``ExponentialMovingAverage``, TensorFlow's averages of the weights.
* ``loss_scale``: ``LossScaleOptimizer``, mixed precision's (dynamic) loss scaling over
  any optimizer, its scale and counter in the state.
* ``tf_checkpoint``: TensorFlow 1.x ``tf.train.Saver`` checkpoints to and from a
  ``TrainState``, over ``_tf_bundle`` (the checkpoint files, read and written with NumPy).
* ``accumulate``, ``finite``, ``parallel``, ``checkpoint``: gradient accumulation,
  skipping non-finite steps, data parallelism, checkpoints — each a separate wrapper.
* ``_inject``: the learning rate held in the optimizer state; ``_variables``: which
  leaves are variables; ``_var_list``: which variables ``var_list`` selects;
  ``_loss_and_grads``: calling and differentiating the loss (``has_aux``,
  ``grad_loss``); ``_pairs``: which variable each ``(gradient, variable)`` pair
  belongs to; ``_habits``: the errors TF1 and optax habits get; ``_float32``: optimizer
  arithmetic in float32 for bfloat16 and float16 parameters.
"""

from funcgrad.train.accumulate import AccumulateGradientsState
from funcgrad.train.accumulate import accumulate_gradients
from funcgrad.train.accumulate import minimize_in_microbatches
from funcgrad.train.checkpoint import Checkpointer
from funcgrad.train.finite import SkippedSteps
from funcgrad.train.finite import skip_nonfinite
from funcgrad.train.finite import skipped_steps
from funcgrad.train.group import OptimizerGroup
from funcgrad.train.learning_rate import InjectLearningRateState
from funcgrad.train.learning_rate import scale_by_learning_rate
from funcgrad.train.learning_rate import set_learning_rate
from funcgrad.train.loss_scale import LossScaleOptimizer
from funcgrad.train.loss_scale import LossScaleState
from funcgrad.train.moving_averages import EmaState
from funcgrad.train.moving_averages import ExponentialMovingAverage
from funcgrad.train.names import variable_names
from funcgrad.train.optimizer import Optimizer
from funcgrad.train.parallel import data_parallel
from funcgrad.train.parallel import shard_map_minimize
from funcgrad.train.schedules import cosine_decay
from funcgrad.train.schedules import cosine_decay_restarts
from funcgrad.train.schedules import exponential_decay
from funcgrad.train.schedules import inverse_time_decay
from funcgrad.train.schedules import linear_cosine_decay
from funcgrad.train.schedules import natural_exp_decay
from funcgrad.train.schedules import noisy_linear_cosine_decay
from funcgrad.train.schedules import piecewise_constant
from funcgrad.train.schedules import polynomial_decay
from funcgrad.train.state import TrainState
from funcgrad.train.tf_checkpoint import restore_tf_checkpoint
from funcgrad.train.tf_checkpoint import save_tf_checkpoint
from funcgrad.train.tf_optimizers import AdadeltaOptimizer
from funcgrad.train.tf_optimizers import AdagradOptimizer
from funcgrad.train.tf_optimizers import AdamOptimizer
from funcgrad.train.tf_optimizers import FtrlOptimizer
from funcgrad.train.tf_optimizers import GradientDescentOptimizer
from funcgrad.train.tf_optimizers import MomentumOptimizer
from funcgrad.train.tf_optimizers import ProximalAdagradOptimizer
from funcgrad.train.tf_optimizers import ProximalGradientDescentOptimizer
from funcgrad.train.tf_optimizers import RMSPropOptimizer
from funcgrad.train.transforms import ScaleByTfAdamState
from funcgrad.train.transforms import TfFtrlState
from funcgrad.train.transforms import TfProximalAdagradState
from funcgrad.train.transforms import scale_by_tf_adam
from funcgrad.train.transforms import tf_ftrl
from funcgrad.train.transforms import tf_proximal_adagrad
from funcgrad.train.transforms import tf_proximal_gradient_descent

__all__ = [
    "AccumulateGradientsState",
    "AdadeltaOptimizer",
    "AdagradOptimizer",
    "AdamOptimizer",
    "Checkpointer",
    "EmaState",
    "ExponentialMovingAverage",
    "FtrlOptimizer",
    "GradientDescentOptimizer",
    "InjectLearningRateState",
    "LossScaleOptimizer",
    "LossScaleState",
    "MomentumOptimizer",
    "Optimizer",
    "OptimizerGroup",
    "ProximalAdagradOptimizer",
    "ProximalGradientDescentOptimizer",
    "RMSPropOptimizer",
    "ScaleByTfAdamState",
    "SkippedSteps",
    "TfFtrlState",
    "TfProximalAdagradState",
    "TrainState",
    "accumulate_gradients",
    "cosine_decay",
    "cosine_decay_restarts",
    "data_parallel",
    "exponential_decay",
    "inverse_time_decay",
    "linear_cosine_decay",
    "minimize_in_microbatches",
    "natural_exp_decay",
    "noisy_linear_cosine_decay",
    "piecewise_constant",
    "polynomial_decay",
    "restore_tf_checkpoint",
    "save_tf_checkpoint",
    "scale_by_learning_rate",
    "scale_by_tf_adam",
    "set_learning_rate",
    "shard_map_minimize",
    "skip_nonfinite",
    "skipped_steps",
    "tf_ftrl",
    "tf_proximal_adagrad",
    "tf_proximal_gradient_descent",
    "variable_names",
]
