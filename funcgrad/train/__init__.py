"""The optimizer shim: TensorFlow 1.x's ``tf.train`` optimizers over optax.

Every public name is importable from here (``fg.train.X``).  Where each concept lives:

* ``state``: ``TrainState``, the explicit training state.
* ``optimizer``: ``Optimizer`` — ``compute_gradients`` / ``apply_gradients`` /
  ``minimize`` over any optax transformation.
* ``group``: ``OptimizerGroup`` — several optimizers over one set of variables (a
  GAN's D and G), sharing one ``TrainState``.
* ``names``: ``variable_names``.
* ``moving_averages``: ``ExponentialMovingAverage``, TensorFlow's averages of the weights.
* ``optimizers/``: ``TF1Optimizer``, the one base of every TF1 optimizer, and the
  optimizers on it — ``tf.train``'s, ``tf.contrib.opt``'s, BERT's, ALBERT's,
  tensor2tensor's — with the optax transformations that hold TensorFlow's update rules.
* ``schedules/``: TensorFlow's learning-rate decays, and the learning rate held in the
  optimizer state (``scale_by_learning_rate``, ``set_learning_rate``).
* ``wrappers/``: ``LossScaleOptimizer``, ``MovingAverageOptimizer`` and ``optimize_loss``
  around any optimizer (on one small base), and gradient accumulation, skipping
  non-finite steps and data parallelism — each a separate wrapper.
* ``checkpoints/``: orbax checkpoints (``Checkpointer``) and TensorFlow 1.x
  ``tf.train.Saver`` checkpoints (``restore_tf_checkpoint``, ``save_tf_checkpoint``).
* Private: ``_variables`` (which leaves are variables), ``_var_list`` (which variables
  ``var_list`` selects), ``_loss_and_grads`` (calling and differentiating the loss:
  ``has_aux``, ``grad_loss``), ``_pairs`` (which variable each ``(gradient, variable)``
  pair belongs to), ``_habits`` (the errors TF1 and optax habits get), ``_sparse``
  (applying an ``fg.IndexedSlices`` gradient to the rows it touches).
"""

from funcgrad.train.checkpoints import Checkpointer
from funcgrad.train.checkpoints import restore_tf_checkpoint
from funcgrad.train.checkpoints import save_tf_checkpoint
from funcgrad.train.group import OptimizerGroup
from funcgrad.train.moving_averages import EmaState
from funcgrad.train.moving_averages import ExponentialMovingAverage
from funcgrad.train.names import variable_names
from funcgrad.train.optimizer import Optimizer
from funcgrad.train.optimizers import AdadeltaOptimizer
from funcgrad.train.optimizers import AdafactorOptimizer
from funcgrad.train.optimizers import AdagradOptimizer
from funcgrad.train.optimizers import AdaMaxOptimizer
from funcgrad.train.optimizers import AdamOptimizer
from funcgrad.train.optimizers import AdamWeightDecayOptimizer
from funcgrad.train.optimizers import AdamWOptimizer
from funcgrad.train.optimizers import AddSignOptimizer
from funcgrad.train.optimizers import FtrlOptimizer
from funcgrad.train.optimizers import GradientDescentOptimizer
from funcgrad.train.optimizers import LAMBOptimizer
from funcgrad.train.optimizers import LARSOptimizer
from funcgrad.train.optimizers import LazyAdamOptimizer
from funcgrad.train.optimizers import MomentumOptimizer
from funcgrad.train.optimizers import MomentumWOptimizer
from funcgrad.train.optimizers import MultistepAdamOptimizer
from funcgrad.train.optimizers import NadamOptimizer
from funcgrad.train.optimizers import PowerSignOptimizer
from funcgrad.train.optimizers import ProximalAdagradOptimizer
from funcgrad.train.optimizers import ProximalGradientDescentOptimizer
from funcgrad.train.optimizers import RMSPropOptimizer
from funcgrad.train.optimizers import ScaleByTfAdamState
from funcgrad.train.optimizers import TF1Optimizer
from funcgrad.train.optimizers import TF1OptimizerState
from funcgrad.train.optimizers import TF1Step
from funcgrad.train.optimizers import TfFtrlState
from funcgrad.train.optimizers import TfProximalAdagradState
from funcgrad.train.optimizers import adafactor_decay_rate_adam
from funcgrad.train.optimizers import adafactor_decay_rate_pow
from funcgrad.train.optimizers import get_cosine_decay_fn
from funcgrad.train.optimizers import get_linear_decay_fn
from funcgrad.train.optimizers import get_restart_decay_fn
from funcgrad.train.optimizers import scale_by_tf_adam
from funcgrad.train.optimizers import tf_ftrl
from funcgrad.train.optimizers import tf_proximal_adagrad
from funcgrad.train.optimizers import tf_proximal_gradient_descent
from funcgrad.train.schedules import InjectLearningRateState
from funcgrad.train.schedules import cosine_decay
from funcgrad.train.schedules import cosine_decay_restarts
from funcgrad.train.schedules import exponential_decay
from funcgrad.train.schedules import inverse_time_decay
from funcgrad.train.schedules import linear_cosine_decay
from funcgrad.train.schedules import natural_exp_decay
from funcgrad.train.schedules import noisy_linear_cosine_decay
from funcgrad.train.schedules import piecewise_constant
from funcgrad.train.schedules import polynomial_decay
from funcgrad.train.schedules import scale_by_learning_rate
from funcgrad.train.schedules import set_learning_rate
from funcgrad.train.state import TrainState
from funcgrad.train.wrappers import AccumulateGradientsState
from funcgrad.train.wrappers import LossScaleOptimizer
from funcgrad.train.wrappers import LossScaleState
from funcgrad.train.wrappers import MovingAverageOptimizer
from funcgrad.train.wrappers import MovingAverageState
from funcgrad.train.wrappers import SkippedSteps
from funcgrad.train.wrappers import accumulate_gradients
from funcgrad.train.wrappers import data_parallel
from funcgrad.train.wrappers import minimize_in_microbatches
from funcgrad.train.wrappers import optimize_loss
from funcgrad.train.wrappers import shard_map_minimize
from funcgrad.train.wrappers import skip_nonfinite
from funcgrad.train.wrappers import skipped_steps

__all__ = [
    "AccumulateGradientsState",
    "AdaMaxOptimizer",
    "AdadeltaOptimizer",
    "AdafactorOptimizer",
    "AdagradOptimizer",
    "AdamOptimizer",
    "AdamWOptimizer",
    "AdamWeightDecayOptimizer",
    "AddSignOptimizer",
    "Checkpointer",
    "EmaState",
    "ExponentialMovingAverage",
    "FtrlOptimizer",
    "GradientDescentOptimizer",
    "InjectLearningRateState",
    "LAMBOptimizer",
    "LARSOptimizer",
    "LazyAdamOptimizer",
    "LossScaleOptimizer",
    "LossScaleState",
    "MomentumOptimizer",
    "MomentumWOptimizer",
    "MovingAverageOptimizer",
    "MovingAverageState",
    "MultistepAdamOptimizer",
    "NadamOptimizer",
    "Optimizer",
    "OptimizerGroup",
    "PowerSignOptimizer",
    "ProximalAdagradOptimizer",
    "ProximalGradientDescentOptimizer",
    "RMSPropOptimizer",
    "ScaleByTfAdamState",
    "SkippedSteps",
    "TF1Optimizer",
    "TF1OptimizerState",
    "TF1Step",
    "TfFtrlState",
    "TfProximalAdagradState",
    "TrainState",
    "accumulate_gradients",
    "adafactor_decay_rate_adam",
    "adafactor_decay_rate_pow",
    "cosine_decay",
    "cosine_decay_restarts",
    "data_parallel",
    "exponential_decay",
    "get_cosine_decay_fn",
    "get_linear_decay_fn",
    "get_restart_decay_fn",
    "inverse_time_decay",
    "linear_cosine_decay",
    "minimize_in_microbatches",
    "natural_exp_decay",
    "noisy_linear_cosine_decay",
    "optimize_loss",
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
