"""Learning rates: TensorFlow 1.x's decays, and the rate held in the optimizer state.

* ``decays``: ``exponential_decay`` and the other ``tf.compat.v1.train.*_decay``
  functions as ``schedule(step)`` factories.
* ``learning_rate``: the learning rate held in the optimizer state (a float, or a
  schedule evaluated at ``global_step``), scaling the updates by it, and
  ``set_learning_rate`` between steps.
"""

from funcgrad.train.schedules import decays
from funcgrad.train.schedules import learning_rate
from funcgrad.train.schedules.decays import cosine_decay as cosine_decay
from funcgrad.train.schedules.decays import cosine_decay_restarts as cosine_decay_restarts
from funcgrad.train.schedules.decays import exponential_decay as exponential_decay
from funcgrad.train.schedules.decays import inverse_time_decay as inverse_time_decay
from funcgrad.train.schedules.decays import linear_cosine_decay as linear_cosine_decay
from funcgrad.train.schedules.decays import natural_exp_decay as natural_exp_decay
from funcgrad.train.schedules.decays import noisy_linear_cosine_decay as noisy_linear_cosine_decay
from funcgrad.train.schedules.decays import piecewise_constant as piecewise_constant
from funcgrad.train.schedules.decays import polynomial_decay as polynomial_decay
from funcgrad.train.schedules.learning_rate import (
    InjectLearningRateState as InjectLearningRateState,
)
from funcgrad.train.schedules.learning_rate import scale_by_learning_rate as scale_by_learning_rate
from funcgrad.train.schedules.learning_rate import set_learning_rate as set_learning_rate

__all__ = decays.__all__ + learning_rate.__all__
