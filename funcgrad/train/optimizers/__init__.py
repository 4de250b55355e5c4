r"""The TF1 optimizers (``tf.compat.v1.train.*Optimizer``) and the optax transformations
that hold TensorFlow's update rules where optax's differ.

* ``tf1``: the nine TF1 optimizers with TensorFlow's arguments, defaults and update rules.
* ``transforms``: the TF-only update rules as optax ``GradientTransformation``\ s.
* ``_float32``: optimizer arithmetic in float32 for bfloat16 and float16 parameters.
"""

from funcgrad.train.optimizers.tf1 import AdadeltaOptimizer
from funcgrad.train.optimizers.tf1 import AdagradOptimizer
from funcgrad.train.optimizers.tf1 import AdamOptimizer
from funcgrad.train.optimizers.tf1 import FtrlOptimizer
from funcgrad.train.optimizers.tf1 import GradientDescentOptimizer
from funcgrad.train.optimizers.tf1 import MomentumOptimizer
from funcgrad.train.optimizers.tf1 import ProximalAdagradOptimizer
from funcgrad.train.optimizers.tf1 import ProximalGradientDescentOptimizer
from funcgrad.train.optimizers.tf1 import RMSPropOptimizer
from funcgrad.train.optimizers.transforms import ScaleByTfAdamState
from funcgrad.train.optimizers.transforms import TfFtrlState
from funcgrad.train.optimizers.transforms import TfProximalAdagradState
from funcgrad.train.optimizers.transforms import scale_by_tf_adam
from funcgrad.train.optimizers.transforms import tf_ftrl
from funcgrad.train.optimizers.transforms import tf_proximal_adagrad
from funcgrad.train.optimizers.transforms import tf_proximal_gradient_descent

__all__ = [
    "AdadeltaOptimizer",
    "AdagradOptimizer",
    "AdamOptimizer",
    "FtrlOptimizer",
    "GradientDescentOptimizer",
    "MomentumOptimizer",
    "ProximalAdagradOptimizer",
    "ProximalGradientDescentOptimizer",
    "RMSPropOptimizer",
    "ScaleByTfAdamState",
    "TfFtrlState",
    "TfProximalAdagradState",
    "scale_by_tf_adam",
    "tf_ftrl",
    "tf_proximal_adagrad",
    "tf_proximal_gradient_descent",
]
