"""funcgrad: TensorFlow's gradient concepts for pure JAX functions.

Where each concept lives (public modules first, then the private machinery behind them;
each private module opens with a design note):

* ``gradients``: ``gradients``, ``value_and_gradients``, ``stop_gradient``, ``tap``,
  ``tap_gradients`` — the public face of differentiation.
* ``higher_order``: ``hessians``, ``hvp``, ``nth_derivative``.
* ``overrides``: ``custom_gradient``, ``RegisterGradient``, ``gradient_override_map``,
  ``identity`` and the TensorFlow op-name table.
* ``conventions``: ``tensorflow_conventions`` — TensorFlow's derivatives where JAX's
  rules give other numbers.
* ``py_func``: NumPy code inside JAX, with a gradient.
* ``indexed_slices``: ``IndexedSlices``, TensorFlow's sparse gradient of an embedding
  table.
* ``clip``: TensorFlow's clipping functions.
* ``summary``: gradient statistics for logging.
* ``diagnostics``: why a gradient is ``None``, traced to the lines that cut it.
* ``testing``: ``fg.testing`` — TensorFlow's ``compute_gradient`` and
  ``check_gradients``, funcgrad's derivatives against central differences.
* ``nn``: ``fg.nn`` — TensorFlow's embedding functions (``embedding_lookup`` over shards,
  ``embedding_lookup_sparse``, ``nce_loss``, ``sampled_softmax_loss``, candidate samplers).
* ``train``: the TF1 optimizer shim (its own ``__init__`` lists its modules).
* ``_types``: the shared vocabulary — type aliases, the one ``Op`` record, the
  gradient-function protocol, ``UnconnectedGradients``, "is this an array leaf".
* ``_checks``: argument checks in the one error voice.
* ``_core/``: the private differentiation machinery (trace, connectivity, the jaxpr
  rewriter, TensorFlow's gradient functions, the backward pass), explained in its
  ``README.md``.
"""

from importlib.metadata import PackageNotFoundError
from importlib.metadata import version

from funcgrad import nn
from funcgrad import testing
from funcgrad import train
from funcgrad.clip import clip_by_average_norm
from funcgrad.clip import clip_by_global_norm
from funcgrad.clip import clip_by_norm
from funcgrad.clip import clip_by_value
from funcgrad.clip import global_norm
from funcgrad.conventions import tensorflow_conventions
from funcgrad.diagnostics import Cut
from funcgrad.diagnostics import Unconnected
from funcgrad.diagnostics import explain_unconnected
from funcgrad.diagnostics import format_unconnected
from funcgrad.gradients import UnconnectedGradients
from funcgrad.gradients import gradients
from funcgrad.gradients import stop_gradient
from funcgrad.gradients import tap
from funcgrad.gradients import tap_gradients
from funcgrad.gradients import value_and_gradients
from funcgrad.higher_order import hessians
from funcgrad.higher_order import hvp
from funcgrad.higher_order import nth_derivative
from funcgrad.indexed_slices import IndexedSlices
from funcgrad.overrides import Op
from funcgrad.overrides import RegisterGradient
from funcgrad.overrides import UnusedOverrideWarning
from funcgrad.overrides import custom_gradient
from funcgrad.overrides import gradient_override_map
from funcgrad.overrides import identity
from funcgrad.py_func import PyFuncError
from funcgrad.py_func import py_func
from funcgrad.summary import GradientSummary
from funcgrad.summary import SummaryWriter
from funcgrad.summary import gradient_summary
from funcgrad.summary import write_gradient_summary

try:
    __version__ = version("funcgrad")
except PackageNotFoundError:  # running from a source tree that is not installed
    __version__ = "0.0.0"

__all__ = [
    "Cut",
    "GradientSummary",
    "IndexedSlices",
    "Op",
    "PyFuncError",
    "RegisterGradient",
    "SummaryWriter",
    "Unconnected",
    "UnconnectedGradients",
    "UnusedOverrideWarning",
    "clip_by_average_norm",
    "clip_by_global_norm",
    "clip_by_norm",
    "clip_by_value",
    "custom_gradient",
    "explain_unconnected",
    "format_unconnected",
    "global_norm",
    "gradient_override_map",
    "gradient_summary",
    "gradients",
    "hessians",
    "hvp",
    "identity",
    "nn",
    "nth_derivative",
    "py_func",
    "stop_gradient",
    "tap",
    "tap_gradients",
    "tensorflow_conventions",
    "testing",
    "train",
    "value_and_gradients",
    "write_gradient_summary",
]
