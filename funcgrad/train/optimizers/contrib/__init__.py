r"""``tf.contrib.opt``'s optimizers (TensorFlow 1.15), one module per source file.

Each module is the file of ``tensorflow/contrib/opt/python/training/`` of its name, at
r1.15, written on :class:`~funcgrad.train.TF1Optimizer` and reading as the original does:

* ``adamax``: ``AdaMaxOptimizer``, on ``AdamOptimizer``.
* ``nadam_optimizer``: ``NadamOptimizer``, on ``AdamOptimizer``.
* ``lazy_adam_optimizer``: ``LazyAdamOptimizer``, on ``AdamOptimizer``.
* ``lars_optimizer``: ``LARSOptimizer``.
* ``addsign``: ``AddSignOptimizer``; ``powersign``: ``PowerSignOptimizer``; ``_sign``: the
  slot, hyperparameters and sign decay the two share.
* ``sign_decay``: ``get_linear_decay_fn``, ``get_cosine_decay_fn``, ``get_restart_decay_fn``.
* ``weight_decay_optimizers``: ``AdamWOptimizer`` and ``MomentumWOptimizer``, TensorFlow's
  Adam and momentum with ``DecoupledWeightDecayExtension`` in front.
"""

from funcgrad.train.optimizers.contrib import adamax
from funcgrad.train.optimizers.contrib import addsign
from funcgrad.train.optimizers.contrib import lars_optimizer
from funcgrad.train.optimizers.contrib import lazy_adam_optimizer
from funcgrad.train.optimizers.contrib import nadam_optimizer
from funcgrad.train.optimizers.contrib import powersign
from funcgrad.train.optimizers.contrib import sign_decay
from funcgrad.train.optimizers.contrib import weight_decay_optimizers
from funcgrad.train.optimizers.contrib.adamax import AdaMaxOptimizer as AdaMaxOptimizer
from funcgrad.train.optimizers.contrib.addsign import AddSignOptimizer as AddSignOptimizer
from funcgrad.train.optimizers.contrib.lars_optimizer import LARSOptimizer as LARSOptimizer
from funcgrad.train.optimizers.contrib.lazy_adam_optimizer import (
    LazyAdamOptimizer as LazyAdamOptimizer,
)
from funcgrad.train.optimizers.contrib.nadam_optimizer import NadamOptimizer as NadamOptimizer
from funcgrad.train.optimizers.contrib.powersign import PowerSignOptimizer as PowerSignOptimizer
from funcgrad.train.optimizers.contrib.sign_decay import get_cosine_decay_fn as get_cosine_decay_fn
from funcgrad.train.optimizers.contrib.sign_decay import get_linear_decay_fn as get_linear_decay_fn
from funcgrad.train.optimizers.contrib.sign_decay import (
    get_restart_decay_fn as get_restart_decay_fn,
)
from funcgrad.train.optimizers.contrib.weight_decay_optimizers import (
    AdamWOptimizer as AdamWOptimizer,
)
from funcgrad.train.optimizers.contrib.weight_decay_optimizers import (
    MomentumWOptimizer as MomentumWOptimizer,
)

__all__ = (
    adamax.__all__
    + addsign.__all__
    + lars_optimizer.__all__
    + lazy_adam_optimizer.__all__
    + nadam_optimizer.__all__
    + powersign.__all__
    + sign_decay.__all__
    + weight_decay_optimizers.__all__
)
