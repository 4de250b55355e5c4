"""TF1 embedding programs as they are found, against TensorFlow 2.21 in TF1 graph mode.

A seq2seq decoder looks its inputs up inside ``tf.while_loop`` (control flow v1, what
TF1 programs ran: the table's gradient is an ``IndexedSlices`` and the optimizer applies
its sparse rule; TF 2.x's ``while_v2`` gives a dense one); its natural JAX port looks
them up inside ``lax.scan``.  A lookup inside ``tf.cond`` / ``lax.cond``.  Every
variable and every slot is compared after each step, by TensorFlow's names (funcgrad's
state written with ``save_tf_checkpoint``).  The ids never touch row 0, so TF1's
accumulator row at id 0 is seen (RMSProp's ``rms`` of row 0 decays) and several rows
stay untouched for some steps.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import funcgrad as fg

_rng = np.random.default_rng(37)
V, D, H, B, T, STEPS = 9, 3, 4, 2, 3, 6
INIT = {
    "E": (0.5 * _rng.normal(size=(V, D))).astype(np.float32),
    "W": (0.5 * _rng.normal(size=(D, H))).astype(np.float32),
    "U": (0.5 * _rng.normal(size=(H, H))).astype(np.float32),
    "O": (0.5 * _rng.normal(size=(H, V))).astype(np.float32),
}
IDS = _rng.integers(1, 6, size=(STEPS, T, B)).astype(np.int32)  # rows 0, 6, 7, 8 untouched
IDS[3:, 0, 0] = 7  # row 7 touched from step 4 on
LABELS = _rng.integers(0, V, size=(STEPS, T, B)).astype(np.int32)

# float32 rounding over six steps of a recurrent model: XLA and TensorFlow's kernels
# order their sums differently, a few ulps a step.
TOL = {"rtol": 5e-5, "atol": 5e-6}

OPTIMIZERS = [
    pytest.param("RMSPropOptimizer", {"learning_rate": 0.05, "momentum": 0.5}, id="rmsprop"),
    pytest.param("MomentumOptimizer", {"learning_rate": 0.1, "momentum": 0.9}, id="momentum"),
]


@pytest.fixture
def control_flow_v1(tf):
    """TF1's control flow (Switch/Merge, Enter/Exit) while a test builds its graphs."""
    was_v2 = tf.compat.v1.control_flow_v2_enabled()
    tf.compat.v1.disable_control_flow_v2()
    yield tf
    if was_v2:
        tf.compat.v1.enable_control_flow_v2()


def _tf_run(tf, build, name, kwargs, feeds):
    """Every global variable by name after each step of ``minimize`` on ``build()``'s loss."""

    def train(params, loss, step):
        opt = getattr(tf.compat.v1.train, name)(**kwargs)
        (g_table, _), *_ = opt.compute_gradients(loss, var_list=[params["E"]])
        assert isinstance(g_table, tf.IndexedSlices)  # the sparse rule, as TF1 applies it
        return opt.minimize(loss, global_step=step)

    return _tf_steps(tf, INIT, build, train, feeds)


def _tf_steps(tf, init, build, make_train, feeds):
    """Every global variable by name after each run of ``make_train(params, loss, step)``."""
    with tf.Graph().as_default():
        params = {k: tf.compat.v1.get_variable(k, initializer=v) for k, v in init.items()}
        placeholders, loss = build(tf, params)
        train = make_train(params, loss, tf.compat.v1.train.get_or_create_global_step())
        variables = {v.op.name: v for v in tf.compat.v1.global_variables()}
        out = []
        with tf.compat.v1.Session() as sess:
            sess.run(tf.compat.v1.global_variables_initializer())
            for feed in feeds:
                sess.run(train, dict(zip(placeholders, feed, strict=True)))
                out.append(sess.run(variables))
        return out


def _fg_run(tf, tmp_path, loss_fn, name, kwargs, feeds):
    """funcgrad's state by TensorFlow's names after each jitted ``minimize``."""
    return _fg_steps(tf, tmp_path, INIT, loss_fn, getattr(fg.train, name)(**kwargs), feeds)


def _fg_steps(tf, tmp_path, init, loss_fn, opt, feeds):
    """funcgrad's state by TensorFlow's names after each jitted ``opt.minimize``."""
    state = opt.init({k: jnp.asarray(v) for k, v in init.items()})
    step = jax.jit(lambda s, *a: opt.minimize(loss_fn, s, *a)[0])
    out = []
    for i, feed in enumerate(feeds):
        state = step(state, *feed)
        prefix = fg.train.save_tf_checkpoint(tmp_path / f"step{i}", state, opt)
        reader = tf.train.load_checkpoint(prefix)
        out.append({k: reader.get_tensor(k) for k in reader.get_variable_to_shape_map()})
    return out


def _assert_same(got, want):
    for i, (g, w) in enumerate(zip(got, want, strict=True)):
        assert sorted(g) == sorted(w)
        for name in w:
            np.testing.assert_allclose(g[name], w[name], **TOL, err_msg=f"{name}, step {i + 1}")


def _xent(logits, labels):
    return -jnp.sum(jnp.take_along_axis(jax.nn.log_softmax(logits), labels[:, None], 1))


def _decoder(p, ids, labels):
    """The JAX port: the lookup inside the scan's step."""

    def step(h, x):
        i, y = x
        h = jnp.tanh(p["E"][i] @ p["W"] + h @ p["U"])
        return h, _xent(h @ p["O"], y)

    return jnp.sum(jax.lax.scan(step, jnp.zeros((B, H), jnp.float32), (ids, labels))[1])


def _tf_decoder(tf, p):
    ids = tf.compat.v1.placeholder(tf.int32, [T, B])
    labels = tf.compat.v1.placeholder(tf.int32, [T, B])

    def body(t, h, total):
        h = tf.tanh(tf.matmul(tf.gather(p["E"], ids[t]), p["W"]) + tf.matmul(h, p["U"]))
        xent = tf.nn.sparse_softmax_cross_entropy_with_logits(
            labels=labels[t], logits=tf.matmul(h, p["O"])
        )
        return t + 1, h, total + tf.reduce_sum(xent)

    start = [tf.constant(0), tf.zeros([B, H]), tf.constant(0.0)]
    return (ids, labels), tf.while_loop(lambda t, h, total: t < T, body, start)[2]


@pytest.mark.parametrize(("name", "kwargs"), OPTIMIZERS)
def test_seq2seq_decoder_with_its_lookup_inside_a_loop(control_flow_v1, tmp_path, name, kwargs):
    tf = control_flow_v1
    feeds = list(zip(IDS, LABELS, strict=True))
    want = _tf_run(tf, _tf_decoder, name, kwargs, feeds)
    got = _fg_run(tf, tmp_path, _decoder, name, kwargs, feeds)
    rms = [w.get("E/RMSProp") for w in want]
    if name == "RMSPropOptimizer":  # TF1's accumulator row at id 0 decays its rms
        np.testing.assert_allclose(rms[0][0], 0.9, rtol=1e-6)
        np.testing.assert_allclose(rms[0][8], 1.0)
    _assert_same(got, want)


def _in_cond(p, ids, labels, pred):
    def read():
        return _xent(jnp.tanh(p["E"][ids[0]] @ p["W"]) @ p["O"], labels[0])

    def other():
        return _xent(jnp.tanh(jnp.ones((B, D)) @ p["W"] @ p["U"]) @ p["O"], labels[0])

    return jax.lax.cond(pred, read, other)


def _tf_in_cond(tf, p):
    ids = tf.compat.v1.placeholder(tf.int32, [T, B])
    labels = tf.compat.v1.placeholder(tf.int32, [T, B])
    pred = tf.compat.v1.placeholder(tf.bool, [])

    def xent(h):
        logits = tf.matmul(tf.tanh(h), p["O"])
        return tf.reduce_sum(
            tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels[0], logits=logits)
        )

    def other():
        return xent(tf.matmul(tf.matmul(tf.ones([B, D]), p["W"]), p["U"]))

    loss = tf.cond(pred, lambda: xent(tf.matmul(tf.gather(p["E"], ids[0]), p["W"])), other)
    return (ids, labels, pred), loss


@pytest.mark.parametrize(("name", "kwargs"), OPTIMIZERS)
def test_a_lookup_inside_cond(control_flow_v1, tmp_path, name, kwargs):
    """Steps 3 and 5 take the branch that does not read the table: TF1 touches every row
    of it with a zero gradient then."""
    tf = control_flow_v1
    preds = np.array([True, True, False, True, False, True])
    feeds = list(zip(IDS, LABELS, preds, strict=True))
    want = _tf_run(tf, _tf_in_cond, name, kwargs, feeds)
    got = _fg_run(tf, tmp_path, _in_cond, name, kwargs, feeds)
    _assert_same(got, want)


# --- wide & deep: one train op of two optimizers ----------------------------------------

WIDE = {
    "linear/w": (0.1 * _rng.normal(size=(12, 1))).astype(np.float32),  # crossed-feature ids
    "linear/b": np.zeros(1, np.float32),
    "dnn/E": (0.5 * _rng.normal(size=(V, D))).astype(np.float32),
    "dnn/hidden": (0.5 * _rng.normal(size=(2 * D, H))).astype(np.float32),
    "dnn/logits": (0.5 * _rng.normal(size=(H, 1))).astype(np.float32),
}
CROSSED = _rng.integers(1, 9, size=(STEPS, 4, 3)).astype(np.int32)  # 4 examples, 3 ids
DEEP_IDS = _rng.integers(1, 7, size=(STEPS, 4, 2)).astype(np.int32)
CLICKS = _rng.integers(0, 2, size=(STEPS, 4)).astype(np.float32)
LINEAR_VARS, DNN_VARS = ["linear/b", "linear/w"], ["dnn/E", "dnn/hidden", "dnn/logits"]
FTRL = {"learning_rate": 0.2, "l1_regularization_strength": 0.01}
ADAGRAD = {"learning_rate": 0.1}


def _wide_and_deep(p, crossed, ids, clicks):
    linear = jnp.sum(p["linear/w"][crossed], axis=(1, 2)) + p["linear/b"][0]
    rows = p["dnn/E"][ids].reshape(ids.shape[0], -1)
    deep = (jax.nn.relu(rows @ p["dnn/hidden"]) @ p["dnn/logits"])[:, 0]
    logits = linear + deep
    return jnp.mean(_sigmoid_xent(logits, clicks))


def _sigmoid_xent(logits, labels):
    return jnp.maximum(logits, 0) - logits * labels + jnp.log1p(jnp.exp(-jnp.abs(logits)))


def _tf_wide_and_deep(tf, p):
    crossed = tf.compat.v1.placeholder(tf.int32, [4, 3])
    ids = tf.compat.v1.placeholder(tf.int32, [4, 2])
    clicks = tf.compat.v1.placeholder(tf.float32, [4])
    linear = tf.reduce_sum(tf.gather(p["linear/w"], crossed), axis=[1, 2]) + p["linear/b"][0]
    rows = tf.reshape(tf.nn.embedding_lookup(p["dnn/E"], ids), [4, 2 * D])
    deep = tf.matmul(tf.nn.relu(tf.matmul(rows, p["dnn/hidden"])), p["dnn/logits"])[:, 0]
    xent = tf.nn.sigmoid_cross_entropy_with_logits(labels=clicks, logits=linear + deep)
    return (crossed, ids, clicks), tf.reduce_mean(xent)


def test_wide_and_deep_one_train_op(tf, tmp_path):
    """tf.estimator's DNNLinearCombined train op: both minimizes on one loss at the same
    values, every member applied, global_step once per step."""

    def train(params, loss, step):
        linear = tf.compat.v1.train.FtrlOptimizer(**FTRL)
        dnn = tf.compat.v1.train.AdagradOptimizer(**ADAGRAD)
        (g_table, _), *_ = dnn.compute_gradients(loss, var_list=[params["dnn/E"]])
        assert isinstance(g_table, tf.IndexedSlices)
        ops = [
            dnn.minimize(loss, var_list=[params[k] for k in DNN_VARS]),
            linear.minimize(loss, var_list=[params[k] for k in LINEAR_VARS]),
        ]
        with tf.control_dependencies([tf.group(*ops)]):
            return tf.compat.v1.assign_add(step, 1)

    feeds = list(zip(CROSSED, DEEP_IDS, CLICKS, strict=True))
    want = _tf_steps(tf, WIDE, _tf_wide_and_deep, train, feeds)
    group = fg.train.OptimizerGroup(
        dnn=(fg.train.AdagradOptimizer(**ADAGRAD), DNN_VARS),
        linear=(fg.train.FtrlOptimizer(**FTRL), LINEAR_VARS),
    )
    got = _fg_steps(tf, tmp_path, WIDE, _wide_and_deep, group, feeds)
    assert [int(w["global_step"]) for w in want] == list(range(1, STEPS + 1))
    _assert_same(got, want)
