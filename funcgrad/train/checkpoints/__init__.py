"""Checkpoints of a ``TrainState``, in two formats.

* ``orbax``: ``Checkpointer``, atomic checkpoints with orbax-checkpoint (no pickles);
  ``_leaf_checksums``: the CRC-32C it records of each leaf and checks, computed where the
  leaf lies.
* ``tf_saver``: TensorFlow 1.x ``tf.train.Saver`` checkpoints to and from a
  ``TrainState`` (``restore_tf_checkpoint``, ``save_tf_checkpoint``).
* ``_tf_bundle``: the tensor-bundle files themselves (format V2), read and written with
  NumPy; its design note describes the file format.  ``_tf_proto``: the protobuf records
  of their index.  ``_tf_slices``: a partitioned variable's slices in those files, read
  into one array and written from one.
* ``_tf_job``: which process writes what of a checkpoint, one process or every process of
  a job together (TensorFlow's sharded format); ``_tf_placement``: a tensor read into a
  template's layout, where a job's processes each read what they hold.
* ``_tf_files``: those files opened, read within bounds, and replaced together under a
  lock (its design note states what a reader, a killed save and a second program saving
  the same prefix can count on); ``_crc32c``: TensorFlow's CRC-32C, its mask, and a CRC
  put together from its parts.
* ``_processes``: the processes of a ``jax.distributed`` job as a checkpoint sees them:
  who holds which box of an array, and bytes exchanged between them.
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
