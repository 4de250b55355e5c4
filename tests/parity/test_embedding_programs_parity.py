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
    with tf.Graph().as_default():
        params = {k: tf.compat.v1.get_variable(k, initializer=v) for k, v in INIT.items()}
        placeholders, loss = build(tf, params)
        step = tf.compat.v1.train.get_or_create_global_step()
        opt = getattr(tf.compat.v1.train, name)(**kwargs)
        (g_table, _), *_ = opt.compute_gradients(loss, var_list=[params["E"]])
        assert isinstance(g_table, tf.IndexedSlices)  # the sparse rule, as TF1 applies it
        train = opt.minimize(loss, global_step=step)
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
    opt = getattr(fg.train, name)(**kwargs)
    state = opt.init({k: jnp.asarray(v) for k, v in INIT.items()})
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
