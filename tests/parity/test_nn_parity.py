"""fg.nn against TensorFlow 2.21's tf.compat.v1.nn in graph mode: values and gradients.

Every case feeds the same arrays to both (the sampled losses: TensorFlow's own draws, as
``sampled_values``), and compares the values and the gradients of a weighted sum of the
output with respect to every table (TensorFlow's ``IndexedSlices`` made dense) and input.
The sums differ in order from TensorFlow's kernels, so the tolerance is a few float32
units of the magnitudes involved.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import funcgrad as fg
from funcgrad.nn import candidate_sampling

RNG = np.random.default_rng(7)
TABLE = RNG.normal(size=(10, 3)).astype(np.float32)


def _close(got, want, scale=1.0):
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=2e-6, atol=4e-6 * scale)


def _check(f, shards, cot, want, want_grads, scale=1.0):
    """``f(shards)`` (also under ``jax.jit``) and its gradients as TensorFlow's."""
    _close(f(shards), want, scale)
    _close(jax.jit(f)(shards), want, scale)
    got_grads = jax.grad(lambda ss: jnp.sum(f(ss) * cot))(shards)
    for got, g in zip(got_grads, want_grads, strict=True):
        _close(got, g, scale)


def _tf_grads(tf, out, xs, cot):
    grads = tf.compat.v1.gradients(out, xs, grad_ys=tf.constant(cot))
    return [tf.convert_to_tensor(g) for g in grads]


def _shards(table, n):
    """The shards of ``table`` for each strategy, split as TensorFlow's partitioners do."""
    sizes = [len(table) // n + (p < len(table) % n) for p in range(n)]
    div = np.split(table, np.cumsum(sizes)[:-1])
    mod = [table[p::n] for p in range(n)]
    return {"mod": mod, "div": div}


@pytest.mark.parametrize("max_norm", [None, 0.8])  # rows of norm 0.4 to 1.4
@pytest.mark.parametrize("strategy", ["mod", "div"])
@pytest.mark.parametrize("n", [1, 3, 4])
def test_embedding_lookup_over_shards(run_tf1, tf, n, strategy, max_norm):
    shards = _shards(TABLE, n)[strategy]
    ids = np.array([[9, 0, 4], [4, 7, 1]], np.int32)
    cot = RNG.normal(size=(2, 3, 3)).astype(np.float32)

    def build():
        xs = [tf.constant(s) for s in shards]
        out = tf.compat.v1.nn.embedding_lookup(
            xs, ids, partition_strategy=strategy, max_norm=max_norm
        )
        return out, _tf_grads(tf, out, xs, cot)

    want, want_grads = run_tf1(build)

    def f(ss):
        return fg.nn.embedding_lookup(list(ss), ids, strategy, max_norm=max_norm)

    _check(f, shards, cot, want, want_grads)


def _sparse(rows, cols, ids, shape):
    indices = np.stack([rows, cols], axis=1).astype(np.int64)
    return indices, np.asarray(ids), shape


# Row 1 has no id; row 0 a repeated one.
SP_ROWS, SP_COLS = np.array([0, 0, 0, 2, 3, 3]), np.array([0, 1, 2, 0, 0, 1])
SP_IDS = np.array([3, 7, 3, 9, 0, 5], np.int64)
SP_WEIGHTS = np.array([0.5, 2.0, 1.5, -1.0, 3.0, 0.25], np.float32)


@pytest.mark.parametrize("n_shards", [1, 2])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("combiner", ["sum", "mean", "sqrtn"])
def test_embedding_lookup_sparse(run_tf1, tf, combiner, weighted, n_shards):
    shards = _shards(TABLE, n_shards)["mod"]
    indices, ids, shape = _sparse(SP_ROWS, SP_COLS, SP_IDS, (4, 3))
    cot = RNG.normal(size=(4, 3)).astype(np.float32)

    def build():
        xs = [tf.constant(s) for s in shards]
        sp_ids = tf.SparseTensor(indices, ids, shape)
        sp_w = tf.SparseTensor(indices, SP_WEIGHTS, shape) if weighted else None
        out = tf.compat.v1.nn.embedding_lookup_sparse(xs, sp_ids, sp_w, combiner=combiner)
        return out, _tf_grads(tf, out, xs, cot)

    want, want_grads = run_tf1(build)

    def f(ss):
        sp_ids = fg.nn.SparseTensor(indices, ids, shape)
        sp_w = fg.nn.SparseTensor(indices, SP_WEIGHTS, shape) if weighted else None
        return fg.nn.embedding_lookup_sparse(list(ss), sp_ids, sp_w, combiner=combiner)

    _check(f, shards, cot, want, want_grads, scale=4)


@pytest.mark.parametrize("default_id", [None, 2])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("combiner", ["sum", "mean", "sqrtn"])
def test_safe_embedding_lookup_sparse(run_tf1, tf, combiner, weighted, default_id):
    shards = _shards(TABLE, 3)["div"]
    # Row 1 has no entry, row 2 only an invalid id, row 3 a weight at or below 0.
    rows, cols = np.array([0, 0, 2, 3, 3, 4]), np.array([0, 1, 0, 0, 1, 0])
    ids = np.array([3, 7, -1, 5, 8, 9], np.int64)
    weights = np.array([0.5, 2.0, 1.0, 0.0, -2.0, 1.5], np.float32)
    indices, ids, shape = _sparse(rows, cols, ids, (5, 2))
    cot = RNG.normal(size=(5, 3)).astype(np.float32)

    def build():
        xs = [tf.constant(s) for s in shards]
        sp_ids = tf.SparseTensor(indices, ids, shape)
        sp_w = tf.SparseTensor(indices, weights, shape) if weighted else None
        out = tf.compat.v1.nn.safe_embedding_lookup_sparse(
            xs, sp_ids, sp_w, combiner=combiner, default_id=default_id
        )
        return out, _tf_grads(tf, out, xs, cot)

    want, want_grads = run_tf1(build)

    def f(ss):
        sp_ids = fg.nn.SparseTensor(indices, ids, shape)
        sp_w = fg.nn.SparseTensor(indices, weights, shape) if weighted else None
        return fg.nn.safe_embedding_lookup_sparse(
            list(ss), sp_ids, sp_w, combiner=combiner, default_id=default_id
        )

    _check(f, shards, cot, want, want_grads, scale=4)


def test_safe_embedding_lookup_sparse_of_rank_3_ids(run_tf1, tf):
    indices = np.array([[0, 0, 0], [0, 1, 1], [1, 1, 0]], np.int64)
    ids = np.array([1, 4, 6], np.int64)
    shape = (2, 2, 3)

    def build():
        return tf.compat.v1.nn.safe_embedding_lookup_sparse(
            tf.constant(TABLE), tf.SparseTensor(indices, ids, shape)
        )

    want = run_tf1(build)
    got = fg.nn.safe_embedding_lookup_sparse(TABLE, fg.nn.SparseTensor(indices, ids, shape))
    assert got.shape == want.shape == (2, 2, 3)
    _close(got, want)


NUM_CLASSES, DIM, BATCH, NUM_SAMPLED = 12, 4, 5, 6
W = RNG.normal(size=(NUM_CLASSES, DIM)).astype(np.float32)
B = RNG.normal(size=(NUM_CLASSES,)).astype(np.float32)
X = RNG.normal(size=(BATCH, DIM)).astype(np.float32)


@pytest.mark.parametrize("n_shards", [1, 3])
@pytest.mark.parametrize("remove_accidental_hits", [False, True])
@pytest.mark.parametrize("num_true", [1, 3])
@pytest.mark.parametrize("loss", ["nce_loss", "sampled_softmax_loss"])
def test_sampled_losses_with_tensorflows_draws(
    run_tf1, tf, loss, num_true, remove_accidental_hits, n_shards
):
    labels = RNG.integers(0, 5, size=(BATCH, num_true)).astype(np.int64)
    w_shards, b_shards = _shards(W, n_shards)["mod"], _shards(B, n_shards)["mod"]
    cot = RNG.normal(size=(BATCH,)).astype(np.float32)

    def build():
        ws = [tf.constant(s) for s in w_shards]
        bs = [tf.constant(s) for s in b_shards]
        x = tf.constant(X)
        sampled = tf.random.log_uniform_candidate_sampler(
            labels, num_true, NUM_SAMPLED, True, NUM_CLASSES, seed=3
        )
        out = getattr(tf.compat.v1.nn, loss)(
            ws, bs, labels, x, NUM_SAMPLED, NUM_CLASSES, num_true=num_true,
            sampled_values=sampled, remove_accidental_hits=remove_accidental_hits,
        )  # fmt: skip
        return out, tuple(sampled), _tf_grads(tf, out, [*ws, *bs, x], cot)

    want, sampled, want_grads = run_tf1(build)
    hits = np.isin(sampled[0], labels).any()
    assert hits, "the case must hold accidental hits to test their removal"

    def f(ws, bs, x):
        return getattr(fg.nn, loss)(
            list(ws), list(bs), labels, x, NUM_SAMPLED, NUM_CLASSES, num_true=num_true,
            sampled_values=sampled, remove_accidental_hits=remove_accidental_hits,
        )  # fmt: skip

    _close(f(w_shards, b_shards, X), want, scale=30)
    _close(jax.jit(f)(w_shards, b_shards, X), want, scale=30)
    g_w, g_b, g_x = jax.grad(lambda *a: jnp.sum(f(*a) * cot), argnums=(0, 1, 2))(
        w_shards, b_shards, X
    )
    for got, g in zip([*g_w, *g_b, g_x], want_grads, strict=True):
        _close(got, g, scale=4)


UNIGRAMS = {"unigrams": [3.0, 1.0, 4.0, 1.0, 5.0, 9.0, 2.0, 6.0, 5.0, 3.0, 5.0, 8.0] * 4,
            "num_reserved_ids": 2, "distortion": 0.75}  # fmt: skip


@pytest.mark.parametrize("unique", [False, True])
@pytest.mark.parametrize("sampler", ["log_uniform", "uniform", "fixed_unigram"])
def test_sampler_expected_counts_are_tensorflows(run_tf1, tf, sampler, unique):
    """TensorFlow's draws cannot be ours; its expected counts are funcgrad's for the same
    classes: directly for the labels with unique=False; with unique=True through the
    number of draws TensorFlow needed (read back from one candidate's count, then checked
    on every other one)."""
    range_max, num_sampled = 50, 20
    labels = np.array([[2, 3], [17, 49]], np.int64)
    options = UNIGRAMS if sampler == "fixed_unigram" else {}

    def build():
        op = getattr(tf.random, f"{sampler}_candidate_sampler")
        return tuple(op(labels, 2, num_sampled, unique, range_max, seed=11, **options))

    sampled, true_ec, sampled_ec = run_tf1(build)

    def counts(classes):  # funcgrad's expected counts of ``classes`` in num_sampled draws
        ours = getattr(fg.nn, f"{sampler}_candidate_sampler")
        out = ours(classes, classes.shape[1], num_sampled, False, range_max, **options,
                   key=jax.random.key(0))[1]  # fmt: skip
        return np.asarray(out, np.float64)

    if not unique:
        np.testing.assert_allclose(counts(labels), true_ec, rtol=3e-6)
        np.testing.assert_allclose(counts(sampled[:, None])[:, 0], sampled_ec, rtol=3e-6)
        return
    p_true, p_sampled = counts(labels) / num_sampled, counts(sampled[:, None])[:, 0] / num_sampled
    tries = int(np.rint(np.log1p(-sampled_ec[0]) / np.log1p(-p_sampled[0])))
    assert tries > num_sampled  # TensorFlow drew some class twice
    for p, want in ((p_sampled, sampled_ec), (p_true, true_ec)):
        got = candidate_sampling.expected_count(jnp.float32(p), tries, num_sampled)
        np.testing.assert_allclose(got, want, rtol=3e-6)


@pytest.mark.parametrize("safe", [False, True])
def test_sparse_lookups_clip_each_row_to_max_norm(run_tf1, tf, safe):
    indices, ids, shape = _sparse(SP_ROWS, SP_COLS, SP_IDS, (4, 3))
    shards = _shards(TABLE, 2)["mod"]
    cot = RNG.normal(size=(4, 3)).astype(np.float32)
    weights = np.abs(SP_WEIGHTS)
    lookup = "safe_embedding_lookup_sparse" if safe else "embedding_lookup_sparse"

    def build():
        xs = [tf.constant(s) for s in shards]
        out = getattr(tf.compat.v1.nn, lookup)(
            xs, tf.SparseTensor(indices, ids, shape), tf.SparseTensor(indices, weights, shape),
            partition_strategy="mod", max_norm=0.8,
        )  # fmt: skip
        return out, _tf_grads(tf, out, xs, cot)

    want, want_grads = run_tf1(build)

    def f(ss):
        return getattr(fg.nn, lookup)(
            list(ss), fg.nn.SparseTensor(indices, ids, shape),
            fg.nn.SparseTensor(indices, weights, shape), partition_strategy="mod", max_norm=0.8,
        )  # fmt: skip

    _check(f, shards, cot, want, want_grads, scale=4)


PARTITIONED_BATCHES = [np.array(b, np.int32) for b in ([9, 0, 5], [1, 1, 4], [6, 2], [3, 3, 9])]


@pytest.mark.parametrize("strategy", ["mod", "div"])
@pytest.mark.parametrize(
    "name, kwargs",
    [
        pytest.param("MomentumOptimizer", {"learning_rate": 0.1, "momentum": 0.9}, id="momentum"),
        pytest.param("RMSPropOptimizer", {"learning_rate": 0.05}, id="rmsprop"),
    ],
)
def test_a_restored_partitioned_table_trains_as_tensorflows(tf, tmp_path, name, kwargs, strategy):
    """A TF1 table made by fixed_size_partitioner(3), trained one step and saved by TF;
    funcgrad restores it whole and trains it by the documented recipe
    (embedding_lookup over jnp.array_split(table, 3)): the table's gradient is the rows of
    the ids, so the rows no id touches keep still, as in TensorFlow's parts (the recipe's
    dense gradient moved them)."""
    tf1 = tf.compat.v1
    prefix = str(tmp_path / "model.ckpt")
    want = []
    with tf.Graph().as_default():
        table = tf1.get_variable(
            "embedding", (10, 3), initializer=tf1.random_normal_initializer(seed=1),
            partitioner=tf1.fixed_size_partitioner(3),
        )  # fmt: skip
        ids = tf1.placeholder(tf.int32, [None])
        rows = tf1.nn.embedding_lookup(table, ids, partition_strategy=strategy)
        loss = tf.reduce_sum(tf.square(tf.tanh(tf.matmul(rows, W[:3])) - 0.5))
        step = tf1.train.get_or_create_global_step()
        train = getattr(tf1.train, name)(**kwargs).minimize(loss, global_step=step)
        whole = tf.concat(list(table), 0)
        with tf1.Session() as sess:
            sess.run(tf1.global_variables_initializer())
            sess.run(train, {ids: PARTITIONED_BATCHES[0]})
            tf1.train.Saver().save(sess, prefix)
            for batch in PARTITIONED_BATCHES[1:]:
                sess.run(train, {ids: batch})
                want.append(sess.run(whole))

    opt = getattr(fg.train, name)(**kwargs)
    state = fg.train.restore_tf_checkpoint(prefix, opt.init({"embedding": jnp.zeros((10, 3))}), opt)

    def loss_fn(params, ids):
        parts = jnp.array_split(params["embedding"], 3)  # fixed_size_partitioner's parts
        rows = fg.nn.embedding_lookup(parts, ids, strategy)
        return jnp.sum(jnp.square(jnp.tanh(rows @ W[:3]) - 0.5))

    step = jax.jit(lambda s, ids: opt.minimize(loss_fn, s, ids)[0])
    for k, (batch, table) in enumerate(zip(PARTITIONED_BATCHES[1:], want, strict=True)):
        state = step(state, batch)
        np.testing.assert_allclose(
            state.params["embedding"], table, rtol=1e-5, atol=1e-6, err_msg=f"step {k + 2}"
        )


@pytest.mark.parametrize("num_true", [1, 2])
@pytest.mark.parametrize("loss", ["nce_loss", "sampled_softmax_loss"])
def test_accidental_hits_of_a_class_drawn_twice(run_tf1, tf, loss, num_true):
    """Candidates drawn with unique=False repeat: TensorFlow's compute_accidental_hits
    removes a repeated class's last copy only (every copy was removed: nce_loss 1.18 off,
    sampled_softmax_loss 0.07)."""
    sampled = np.array([0, 3, 0, 1, 3, 2], np.int64)  # 0 and 3 twice
    labels = np.array([[0, 3], [3, 3], [1, 0], [4, 2], [0, 5]], np.int64)[:, :num_true]
    true_ec = RNG.uniform(0.2, 2.0, size=labels.shape).astype(np.float32)
    sampled_ec = RNG.uniform(0.2, 2.0, size=sampled.shape).astype(np.float32)
    cot = RNG.normal(size=(BATCH,)).astype(np.float32)

    def build():
        w, b, x = tf.constant(W), tf.constant(B), tf.constant(X)
        drawn = (tf.constant(sampled), tf.constant(true_ec), tf.constant(sampled_ec))
        out = getattr(tf.compat.v1.nn, loss)(
            w, b, labels, x, len(sampled), NUM_CLASSES, num_true=num_true,
            sampled_values=drawn, remove_accidental_hits=True,
        )  # fmt: skip
        return out, _tf_grads(tf, out, [w, b, x], cot)

    want, want_grads = run_tf1(build)

    def f(w, b, x):
        return getattr(fg.nn, loss)(
            w, b, labels, x, len(sampled), NUM_CLASSES, num_true=num_true,
            sampled_values=(sampled, true_ec, sampled_ec), remove_accidental_hits=True,
        )  # fmt: skip

    _close(f(W, B, X), want, scale=30)
    _close(jax.jit(f)(W, B, X), want, scale=30)
    grads = jax.grad(lambda *a: jnp.sum(f(*a) * cot), argnums=(0, 1, 2))(W, B, X)
    for got, g in zip(grads, want_grads, strict=True):
        _close(got, g, scale=4)
