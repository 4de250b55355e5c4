"""The TF1 optimizers' sparse rules against TensorFlow's own ``_apply_sparse`` trajectories.

An embedding model — a table ``E`` read by ``tf.gather`` / ``tf.nn.embedding_lookup``,
then a dense layer ``W`` — trains for ``len(IDS)`` steps in a TF1 graph, where ``E``'s
gradient is an ``IndexedSlices`` and each optimizer applies its sparse rule.  funcgrad
trains the same model ported with ``jnp.take`` / ``E[ids]``, from the same start and
batches, with the ``IndexedSlices`` gradient of the gathered rows, and the table and
layer are compared after every step.  The ids repeat within a batch and leave rows
untouched for several steps (row 0 after step 0, rows 6 and 7 until step 4), where a
dense update would move them for most optimizers.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import funcgrad as fg
from tests.parity.test_optimizers_parity import CASES as DENSE_CASES

_rng = np.random.default_rng(7)
V, D, K = 8, 3, 2
E0 = (0.5 * _rng.normal(size=(V, D))).astype(np.float32)
W0 = (0.5 * _rng.normal(size=(D, K))).astype(np.float32)
IDS = np.array(
    [[0, 1, 1, 2], [2, 3, 3, 3], [1, 4, 2, 4], [5, 5, 1, 3], [6, 2, 6, 7], [3, 1, 7, 7]],
    np.int32,
)
YS = _rng.normal(size=(len(IDS), IDS.shape[1], K)).astype(np.float32)

# The dense parity tests' optimizers and options, and two more: Ftrl and ProximalAdagrad
# with L1 alone, the settings where the issue measured TF's sparse and dense rules apart.
CASES = [
    *DENSE_CASES,
    pytest.param(
        "FtrlOptimizer", {"learning_rate": 0.1, "l1_regularization_strength": 0.01}, id="ftrl_l1"
    ),
    pytest.param(
        "ProximalAdagradOptimizer",
        {"learning_rate": 0.1, "l1_regularization_strength": 0.1},
        id="proximal_adagrad_l1",
    ),
]

# float32 rounding over a few steps: TensorFlow's kernels and XLA's order their
# arithmetic differently (and TF's rsqrt rounds per CPU), never more than a few ulps a step.
TOL = {"rtol": 2e-5, "atol": 2e-6}


def _loss(rows, w, y):
    return jnp.sum(jnp.square(jnp.tanh(rows @ w) - y))


def _tf_trajectory(tf, name, kwargs, lookup, *, decay=False, twice=False):
    """``[(E, W)]`` after each step of TensorFlow's ``minimize`` on the embedding model."""
    with tf.Graph().as_default():
        table = tf.compat.v1.Variable(E0, name="E")
        w = tf.compat.v1.Variable(W0, name="W")
        ids = tf.compat.v1.placeholder(tf.int32, [None])
        y = tf.compat.v1.placeholder(tf.float32, [None, K])
        step = tf.compat.v1.train.get_or_create_global_step()
        if twice:  # two lookups of one table: TF concatenates the two IndexedSlices
            half = tf.shape(ids)[0] // 2
            rows = tf.concat([lookup(table, ids[:half]), lookup(table, ids[half:])], 0)
        else:
            rows = lookup(table, ids)
        loss = tf.reduce_sum(tf.square(tf.tanh(tf.matmul(rows, w)) - y))
        if decay:
            kwargs = {**kwargs, "learning_rate": _tf_decay(tf, kwargs["learning_rate"], step)}
        opt = getattr(tf.compat.v1.train, name)(**kwargs)
        (g_table, _), _ = opt.compute_gradients(loss)
        assert isinstance(g_table, tf.IndexedSlices) == (lookup is not _dense_lookup)
        return _tf_steps(tf, opt.minimize(loss, global_step=step), (table, w), ids, y)


def _tf_steps(tf, train, fetches, ids, y):
    """``fetches`` after each run of ``train`` on the batches ``IDS``, ``YS``."""
    out = []
    with tf.compat.v1.Session() as sess:
        sess.run(tf.compat.v1.global_variables_initializer())
        for i in range(len(IDS)):
            sess.run(train, {ids: IDS[i], y: YS[i]})
            out.append(sess.run(list(fetches)))
    return out


def _tf_decay(tf, rate, step):
    return tf.compat.v1.train.exponential_decay(rate, step, 2, 0.5, staircase=True)


def _dense_lookup(table, ids):
    """A gather and a matmul of one table: TensorFlow's gradient is dense."""
    import tensorflow as tf

    return tf.gather(table, ids) + 0.1 * tf.matmul(tf.ones([tf.shape(ids)[0], V]), table)


def _fg_trajectory(opt, take, *, twice=False):
    """``[(E, W)]`` after each jitted funcgrad step with an ``IndexedSlices`` gradient."""

    @jax.jit
    def step(state, ids, y):
        table, w = state.params["E"], state.params["W"]
        if twice:
            ids = jnp.concatenate([ids[: len(ids) // 2], ids[len(ids) // 2 :]])
        g_rows, g_w = jax.grad(_loss, argnums=(0, 1))(take(table, ids), w, y)
        g_table = fg.IndexedSlices(g_rows, ids, table.shape)
        return opt.apply_gradients([(g_table, None), (g_w, None)], state)

    return _fg_steps(opt, step)


def _fg_steps(opt, step):
    """``(E, W)`` after each ``step(state, ids, y)`` from ``opt.init`` on the batches."""
    state = opt.init({"E": jnp.asarray(E0), "W": jnp.asarray(W0)})
    out = []
    for i in range(len(IDS)):
        state = step(state, IDS[i], YS[i])
        out.append((state.params["E"], state.params["W"]))
    return out


def _assert_same(got, want):
    for i, ((e, w), (te, tw)) in enumerate(zip(got, want, strict=True)):
        np.testing.assert_allclose(e, te, **TOL, err_msg=f"E after step {i + 1}")
        np.testing.assert_allclose(w, tw, **TOL, err_msg=f"W after step {i + 1}")


@pytest.mark.parametrize("name, kwargs", CASES)
def test_gather_model(tf, name, kwargs) -> None:
    """tf.gather / jnp.take: every optimizer's sparse rule, step by step."""
    want = _tf_trajectory(tf, name, kwargs, tf.gather)
    got = _fg_trajectory(getattr(fg.train, name)(**kwargs), lambda t, i: jnp.take(t, i, axis=0))
    _assert_same(got, want)


@pytest.mark.parametrize(
    "name, kwargs",
    [c for c in CASES if c.id in {"momentum", "adam", "rmsprop_centered", "ftrl_l1", "adagrad"}],
)
def test_embedding_lookup_model(tf, name, kwargs) -> None:
    """tf.nn.embedding_lookup / E[ids]."""
    want = _tf_trajectory(tf, name, kwargs, tf.nn.embedding_lookup)
    got = _fg_trajectory(getattr(fg.train, name)(**kwargs), lambda t, i: t[i])
    _assert_same(got, want)


def test_two_lookups_of_one_table(tf) -> None:
    """Two lookups of one table: their rows concatenated into one IndexedSlices."""
    kwargs = {"learning_rate": 0.1, "momentum": 0.9}
    want = _tf_trajectory(tf, "MomentumOptimizer", kwargs, tf.gather, twice=True)
    got = _fg_trajectory(fg.train.MomentumOptimizer(**kwargs), lambda t, i: t[i], twice=True)
    _assert_same(got, want)


def test_decayed_learning_rate(tf) -> None:
    """The sparse rule reads the schedule at global_step, as TF's decayed rate tensor."""
    kwargs = {"learning_rate": 0.1, "momentum": 0.9}
    want = _tf_trajectory(tf, "MomentumOptimizer", kwargs, tf.gather, decay=True)
    schedule = fg.train.exponential_decay(0.1, decay_steps=2, decay_rate=0.5, staircase=True)
    opt = fg.train.MomentumOptimizer(schedule, momentum=0.9)
    _assert_same(_fg_trajectory(opt, lambda t, i: t[i]), want)


def test_gather_and_matmul_is_dense(tf) -> None:
    """A table also read by a matmul gets a dense gradient in TF (its dense rule): the
    same model with jax.grad of the whole table."""
    kwargs = {"learning_rate": 0.1, "momentum": 0.9}
    want = _tf_trajectory(tf, "MomentumOptimizer", kwargs, _dense_lookup)
    opt = fg.train.MomentumOptimizer(**kwargs)

    def loss(params, ids, y):
        table = params["E"]
        rows = table[ids] + 0.1 * jnp.ones((len(ids), V)) @ table
        return _loss(rows, params["W"], y)

    step = jax.jit(lambda s, ids, y: opt.minimize(loss, s, ids, y)[0])
    _assert_same(_fg_steps(opt, step), want)


def _lazy_adam_reference(lr=0.05, beta1=0.9, beta2=0.999, epsilon=1e-8):
    """tf.contrib.opt.LazyAdamOptimizer's ``_apply_sparse`` (TF 1.15's source) in NumPy
    float32, on the gradients of its own trajectory; W gets Adam's dense ``ApplyAdam``."""
    f = np.float32
    table, w = E0.copy(), W0.copy()
    m, v, mw, vw = (np.zeros_like(x) for x in (table, table, w, w))
    b1p, b2p = f(beta1), f(beta2)
    out = []
    for ids, y in zip(IDS, YS, strict=True):
        g_rows, g_w = (np.asarray(g) for g in jax.grad(_loss, argnums=(0, 1))(table[ids], w, y))
        unique, inverse = np.unique(ids, return_inverse=True)
        g = np.zeros((len(unique), D), f)
        np.add.at(g, inverse, g_rows)
        rate = f(lr) * np.sqrt(f(1) - b2p) / (f(1) - b1p)
        m[unique] = f(beta1) * m[unique] + (f(1) - f(beta1)) * g
        v[unique] = f(beta2) * v[unique] + (f(1) - f(beta2)) * np.square(g)
        table[unique] -= rate * m[unique] / (np.sqrt(v[unique]) + f(epsilon))
        mw += (g_w - mw) * (f(1) - f(beta1))
        vw += (np.square(g_w) - vw) * (f(1) - f(beta2))
        w -= rate * mw / (np.sqrt(vw) + f(epsilon))
        b1p, b2p = b1p * f(beta1), b2p * f(beta2)
        out.append((table.copy(), w.copy()))
    return out


def test_lazy_adam_against_its_tf1_definition() -> None:
    """LazyAdam, step by step, against TF1 contrib's definition written in NumPy (TF 2.21
    has no tf.contrib); untouched rows keep their values and moments."""
    got = _fg_trajectory(fg.train.LazyAdamOptimizer(0.05), lambda t, i: t[i])
    _assert_same(got, _lazy_adam_reference())
    untouched = np.asarray(got[3][0])[[6, 7]]  # rows 6 and 7 are first read at step 5
    np.testing.assert_array_equal(untouched, E0[[6, 7]])


def test_adam_bias_correction_over_300_steps(tf) -> None:
    """Adam's beta powers are TF's running float32 products (equal, bit for bit, after 300
    steps: float32 products round the same on every CPU), and the trajectory follows."""
    rng = np.random.default_rng(3)
    x = rng.normal(size=(16, 4)).astype(np.float32)
    y = rng.normal(size=(16, 3)).astype(np.float32)
    w0 = (0.5 * rng.normal(size=(4, 3))).astype(np.float32)
    with tf.Graph().as_default():
        w = tf.compat.v1.Variable(w0)
        tf_opt = tf.compat.v1.train.AdamOptimizer(0.05)
        train = tf_opt.minimize(tf.reduce_mean(tf.square(tf.tanh(tf.matmul(x, w)) - y)))
        with tf.compat.v1.Session() as sess:
            sess.run(tf.compat.v1.global_variables_initializer())
            for _ in range(300):
                sess.run(train)
            want, powers = sess.run([w, list(tf_opt._get_beta_accumulators())])
    opt = fg.train.AdamOptimizer(0.05)
    loss = lambda w: jnp.mean(jnp.square(jnp.tanh(x @ w) - y))  # noqa: E731
    step = jax.jit(lambda s: opt.minimize(loss, s)[0])
    state = opt.init(jnp.asarray(w0))
    for _ in range(300):
        state = step(state)
    adam = state.opt_state.inner_state[0]
    assert [adam.beta1_power, adam.beta2_power] == powers
    np.testing.assert_allclose(state.params, want, rtol=1e-4, atol=1e-5)


def test_compute_gradients_clip_by_global_norm_apply(tf) -> None:
    """compute_gradients -> clip_by_global_norm (active; the norm of the values, duplicates
    included) -> apply_gradients, as the TF1 program writes it."""

    def loss_fn(params, ids, y):
        return _loss(jnp.take(params["E"], ids, axis=0), params["W"], y)

    opt = fg.train.AdagradOptimizer(0.1)
    probe = opt.compute_gradients(loss_fn, {"E": E0, "W": W0}, IDS[0], YS[0])
    if not isinstance(probe[0][0], fg.IndexedSlices):
        pytest.skip(
            "compute_gradients gives no IndexedSlices on this branch (issue 25's other half)"
        )
    with tf.Graph().as_default():
        table, w = tf.compat.v1.Variable(E0), tf.compat.v1.Variable(W0)
        ids = tf.compat.v1.placeholder(tf.int32, [None])
        y = tf.compat.v1.placeholder(tf.float32, [None, K])
        loss = tf.reduce_sum(tf.square(tf.tanh(tf.matmul(tf.gather(table, ids), w)) - y))
        tf_opt = tf.compat.v1.train.AdagradOptimizer(0.1)
        grads, variables = zip(*tf_opt.compute_gradients(loss), strict=True)
        clipped, _ = tf.clip_by_global_norm(grads, 0.5)
        train = tf_opt.apply_gradients(zip(clipped, variables, strict=True))
        want = _tf_steps(tf, train, (table, w), ids, y)

    @jax.jit
    def step(state, ids, y):
        gvs = opt.compute_gradients(loss_fn, state.params, ids, y)
        clipped, _ = fg.clip_by_global_norm([g for g, _ in gvs], 0.5)
        return opt.apply_gradients(list(zip(clipped, [v for _, v in gvs], strict=True)), state)

    _assert_same(_fg_steps(opt, step), want)


def _fg_minimize_trajectory(opt, take):
    """``[(E, W)]`` after each jitted ``opt.minimize`` of the model as a port writes it:
    ``compute_gradients`` finds the gather in the loss and gives ``E`` an IndexedSlices."""

    @jax.jit
    def step(state, ids, y):
        def loss(p, ids, y):
            return _loss(take(p["E"], ids), p["W"], y)

        return opt.minimize(loss, state, ids, y)[0]

    return _fg_steps(opt, step)


@pytest.mark.parametrize("name, kwargs", CASES)
def test_minimize_of_the_ported_model(tf, name, kwargs) -> None:
    """The port as written (``minimize`` of a loss that reads ``E[ids]`` / ``jnp.take``):
    TensorFlow's sparse rule, with no IndexedSlices in the user's code."""
    want = _tf_trajectory(tf, name, kwargs, tf.gather)
    for take in (lambda t, i: t[i], lambda t, i: jnp.take(t, i, axis=0)):
        _assert_same(_fg_minimize_trajectory(getattr(fg.train, name)(**kwargs), take), want)


EMPTY_BATCHES = [np.array([1, 2, 2], np.int32), np.zeros(0, np.int32), np.array([3, 1], np.int32)]


@pytest.mark.parametrize(
    "name, kwargs",
    [
        pytest.param("AdamOptimizer", {"learning_rate": 0.1}, id="adam"),
        pytest.param("MomentumOptimizer", {"learning_rate": 0.1, "momentum": 0.9}, id="momentum"),
    ],
)
def test_an_empty_batch_of_ids(tf, name, kwargs) -> None:
    """A step whose batch has no id: TensorFlow's gather gives the table an empty
    IndexedSlices, with which Adam's sparse rule still decays its moments and moves every
    row touched before (Momentum's moves nothing).  The table is the only variable."""
    want = []
    with tf.Graph().as_default():
        table = tf.compat.v1.Variable(E0)
        ids = tf.compat.v1.placeholder(tf.int32, [None])
        loss = tf.reduce_sum(tf.square(tf.tanh(tf.matmul(tf.gather(table, ids), W0))))
        train = getattr(tf.compat.v1.train, name)(**kwargs).minimize(loss)
        with tf.compat.v1.Session() as sess:
            sess.run(tf.compat.v1.global_variables_initializer())
            for batch in EMPTY_BATCHES:
                sess.run(train, {ids: batch})
                want.append(sess.run(table))
    assert np.array_equal(want[1], want[0]) == (name == "MomentumOptimizer")

    opt = getattr(fg.train, name)(**kwargs)

    def step(state, ids):
        return opt.minimize(lambda e, i: jnp.sum(jnp.square(jnp.tanh(e[i] @ W0))), state, ids)[0]

    for run in (step, jax.jit(step)):
        state = opt.init(jnp.asarray(E0))
        for k, (batch, table) in enumerate(zip(EMPTY_BATCHES, want, strict=True)):
            state = run(state, jnp.asarray(batch))
            np.testing.assert_allclose(state.params, table, **TOL, err_msg=f"after step {k + 1}")
