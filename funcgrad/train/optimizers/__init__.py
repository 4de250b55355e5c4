r"""The TF1 optimizers (``tf.compat.v1.train.*Optimizer``) and the optax transformations
that hold TensorFlow's update rules where optax's differ.

* ``base``: ``TF1Optimizer``, the one base of every named TF optimizer: slots and
  non-slot variables by TensorFlow's names, the hyperparameters and their checks, the
  dense and sparse rules (``_apply_dense`` / ``_apply_sparse``), a class's optax chain.
* ``tf1``: ``tf.train``'s optimizers with TensorFlow's arguments, defaults and update rules.
* ``contrib``: ``tf.contrib.opt``'s, one module per TensorFlow source file
  (``AdaMaxOptimizer``, ``NadamOptimizer``, ``LazyAdamOptimizer``, ``LARSOptimizer``,
  ``AddSignOptimizer``, ``PowerSignOptimizer``, the sign decays, ``AdamWOptimizer`` and
  ``MomentumWOptimizer``).
* ``bert``: BERT's ``AdamWeightDecayOptimizer``; ``albert``: ALBERT's ``LAMBOptimizer``, on
  BERT's; ``tensor2tensor``: tensor2tensor's ``AdafactorOptimizer`` and
  ``MultistepAdamOptimizer``.
* ``transforms``: the TF-only update rules as optax ``GradientTransformation``\ s.
* ``_kernels``: TensorFlow's update kernels, each written once, which the rules and the
  transformations call; ``_float32``: optimizer arithmetic in float32 for bfloat16 and
  float16 parameters.
"""

from funcgrad.train.optimizers import albert
from funcgrad.train.optimizers import base
from funcgrad.train.optimizers import bert
from funcgrad.train.optimizers import contrib
from funcgrad.train.optimizers import tensor2tensor
from funcgrad.train.optimizers import tf1
from funcgrad.train.optimizers import transforms
from funcgrad.train.optimizers.albert import LAMBOptimizer as LAMBOptimizer
from funcgrad.train.optimizers.base import TF1Optimizer as TF1Optimizer
from funcgrad.train.optimizers.base import TF1OptimizerState as TF1OptimizerState
from funcgrad.train.optimizers.base import TF1Step as TF1Step
from funcgrad.train.optimizers.bert import AdamWeightDecayOptimizer as AdamWeightDecayOptimizer
from funcgrad.train.optimizers.contrib import AdaMaxOptimizer as AdaMaxOptimizer
from funcgrad.train.optimizers.contrib import AdamWOptimizer as AdamWOptimizer
from funcgrad.train.optimizers.contrib import AddSignOptimizer as AddSignOptimizer
from funcgrad.train.optimizers.contrib import LARSOptimizer as LARSOptimizer
from funcgrad.train.optimizers.contrib import LazyAdamOptimizer as LazyAdamOptimizer
from funcgrad.train.optimizers.contrib import MomentumWOptimizer as MomentumWOptimizer
from funcgrad.train.optimizers.contrib import NadamOptimizer as NadamOptimizer
from funcgrad.train.optimizers.contrib import PowerSignOptimizer as PowerSignOptimizer
from funcgrad.train.optimizers.contrib import get_cosine_decay_fn as get_cosine_decay_fn
from funcgrad.train.optimizers.contrib import get_linear_decay_fn as get_linear_decay_fn
from funcgrad.train.optimizers.contrib import get_restart_decay_fn as get_restart_decay_fn
from funcgrad.train.optimizers.tensor2tensor import AdafactorOptimizer as AdafactorOptimizer
from funcgrad.train.optimizers.tensor2tensor import MultistepAdamOptimizer as MultistepAdamOptimizer
from funcgrad.train.optimizers.tensor2tensor import (
    adafactor_decay_rate_adam as adafactor_decay_rate_adam,
)
from funcgrad.train.optimizers.tensor2tensor import (
    adafactor_decay_rate_pow as adafactor_decay_rate_pow,
)
from funcgrad.train.optimizers.tf1 import AdadeltaOptimizer as AdadeltaOptimizer
from funcgrad.train.optimizers.tf1 import AdagradOptimizer as AdagradOptimizer
from funcgrad.train.optimizers.tf1 import AdamOptimizer as AdamOptimizer
from funcgrad.train.optimizers.tf1 import FtrlOptimizer as FtrlOptimizer
from funcgrad.train.optimizers.tf1 import GradientDescentOptimizer as GradientDescentOptimizer
from funcgrad.train.optimizers.tf1 import MomentumOptimizer as MomentumOptimizer
from funcgrad.train.optimizers.tf1 import ProximalAdagradOptimizer as ProximalAdagradOptimizer
from funcgrad.train.optimizers.tf1 import (
    ProximalGradientDescentOptimizer as ProximalGradientDescentOptimizer,
)
from funcgrad.train.optimizers.tf1 import RMSPropOptimizer as RMSPropOptimizer
from funcgrad.train.optimizers.transforms import ScaleByTfAdamState as ScaleByTfAdamState
from funcgrad.train.optimizers.transforms import TfFtrlState as TfFtrlState
from funcgrad.train.optimizers.transforms import TfProximalAdagradState as TfProximalAdagradState
from funcgrad.train.optimizers.transforms import scale_by_tf_adam as scale_by_tf_adam
from funcgrad.train.optimizers.transforms import tf_ftrl as tf_ftrl
from funcgrad.train.optimizers.transforms import tf_proximal_adagrad as tf_proximal_adagrad
from funcgrad.train.optimizers.transforms import (
    tf_proximal_gradient_descent as tf_proximal_gradient_descent,
)

__all__ = (
    albert.__all__
    + base.__all__
    + bert.__all__
    + contrib.__all__
    + tensor2tensor.__all__
    + tf1.__all__
    + transforms.__all__
)
