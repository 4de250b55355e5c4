"""Learning rates: TensorFlow 1.x's decays, and the rate held in the optimizer state.

* ``decays``: ``exponential_decay`` and the other ``tf.compat.v1.train.*_decay``
  functions as ``schedule(step)`` factories.
* ``injection``: scaling the updates by the learning rate (a float or a schedule) and
  ``set_learning_rate`` between steps.
* ``_inject``: the learning rate as traced optimizer state.
"""

from funcgrad.train.schedules import decays
from funcgrad.train.schedules import injection
from funcgrad.train.schedules.decays import cosine_decay as cosine_decay
from funcgrad.train.schedules.decays import cosine_decay_restarts as cosine_decay_restarts
from funcgrad.train.schedules.decays import exponential_decay as exponential_decay
from funcgrad.train.schedules.decays import inverse_time_decay as inverse_time_decay
from funcgrad.train.schedules.decays import linear_cosine_decay as linear_cosine_decay
from funcgrad.train.schedules.decays import natural_exp_decay as natural_exp_decay
from funcgrad.train.schedules.decays import noisy_linear_cosine_decay as noisy_linear_cosine_decay
from funcgrad.train.schedules.decays import piecewise_constant as piecewise_constant
from funcgrad.train.schedules.decays import polynomial_decay as polynomial_decay
from funcgrad.train.schedules.injection import InjectLearningRateState as InjectLearningRateState
from funcgrad.train.schedules.injection import scale_by_learning_rate as scale_by_learning_rate
from funcgrad.train.schedules.injection import set_learning_rate as set_learning_rate

__all__ = decays.__all__ + injection.__all__
