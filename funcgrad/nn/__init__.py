"""TensorFlow's embedding functions (``tf.nn``'s lookups, sampled losses and samplers).

Every public name is importable from here (``fg.nn.X``).  Where each concept lives:

* ``embedding``: ``embedding_lookup`` over a table or its shards,
  ``embedding_lookup_sparse``, ``safe_embedding_lookup_sparse`` and ``SparseTensor``.
* ``sampled_losses``: ``nce_loss`` and ``sampled_softmax_loss``.
* ``candidate_sampling``: ``log_uniform_candidate_sampler``,
  ``uniform_candidate_sampler`` and ``fixed_unigram_candidate_sampler``, drawn from
  explicit PRNG keys.

Each reads its tables by gathers of whole rows, so ``compute_gradients`` gives them an
``fg.IndexedSlices``, as ``tf.gradients`` does.
"""

from funcgrad.nn.candidate_sampling import fixed_unigram_candidate_sampler
from funcgrad.nn.candidate_sampling import log_uniform_candidate_sampler
from funcgrad.nn.candidate_sampling import uniform_candidate_sampler
from funcgrad.nn.embedding import SparseTensor
from funcgrad.nn.embedding import embedding_lookup
from funcgrad.nn.embedding import embedding_lookup_sparse
from funcgrad.nn.embedding import safe_embedding_lookup_sparse
from funcgrad.nn.sampled_losses import nce_loss
from funcgrad.nn.sampled_losses import sampled_softmax_loss

__all__ = [
    "SparseTensor",
    "embedding_lookup",
    "embedding_lookup_sparse",
    "fixed_unigram_candidate_sampler",
    "log_uniform_candidate_sampler",
    "nce_loss",
    "safe_embedding_lookup_sparse",
    "sampled_softmax_loss",
    "uniform_candidate_sampler",
]
