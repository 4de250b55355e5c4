"""Checkpoints of a ``TrainState``, in two formats.

* ``orbax``: ``Checkpointer``, atomic checkpoints with orbax-checkpoint (no pickles).
* ``tf_saver``: TensorFlow 1.x ``tf.train.Saver`` checkpoints to and from a
  ``TrainState`` (``restore_tf_checkpoint``, ``save_tf_checkpoint``).
* ``_tf_bundle``: the tensor-bundle files themselves (format V2), read and written with
  NumPy; its design note describes the file format.  ``_tf_proto``: the protobuf records
  of their index.  ``_tf_slices``: a partitioned variable's slices in those files, read
  into one array and written from one.
* ``_tf_files``: those files opened, read within bounds and replaced as a pair (its design
  note states what a reader and a killed save can count on); ``_crc32c``: TensorFlow's
  CRC-32C and its mask.
* ``_tf_layout``: which value of a ``TrainState`` (an optimizer's, a group's, a loss
  scale's, a moving average's) is which TensorFlow variable name; used by ``tf_saver``
  and by ``fg.testing.compare_tf_checkpoint``.
"""

from funcgrad.train.checkpoints import orbax
from funcgrad.train.checkpoints import tf_saver
from funcgrad.train.checkpoints.orbax import Checkpointer as Checkpointer
from funcgrad.train.checkpoints.tf_saver import restore_tf_checkpoint as restore_tf_checkpoint
from funcgrad.train.checkpoints.tf_saver import save_tf_checkpoint as save_tf_checkpoint

__all__ = orbax.__all__ + tf_saver.__all__
