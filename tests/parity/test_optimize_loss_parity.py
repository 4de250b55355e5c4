"""fg.train.optimize_loss against tf.contrib.layers.optimize_loss, run in TF 2.21 graph mode.

tf.contrib is gone from TF 2.21, so ``optimize_loss`` and its helpers are transcribed
below from tensorflow/tensorflow ``tensorflow/contrib/layers/python/layers/optimizers.py``
(TF 1.x's contrib, at commit 015a50c949a0a0973b82840ec05cc4b43f30d9ba), with
``tf.compat.v1`` for the modules it imported and one change: its
``random_ops.truncated_normal`` is a parameter, so a test can feed the noise funcgrad drew
(the rule funcgrad draws it by is checked against an independent draw in
``tests/train/wrappers/test_processing.py``, and its distribution against TensorFlow's below).

Each case runs the shared model of ``tf1_projects_model`` (a dense layer, a bias, a
``LayerNorm/gamma`` and an embedding table read by a gather, so the sparse rules take
part) for 6 steps, and compares every variable and slot by its TensorFlow name after
each step.
"""

# The transcription keeps the original's spelling: %-formatting, zip without strict, ...
# ruff: noqa: B905, RUF015, SIM108, UP031

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import funcgrad as fg
from tests.parity.tf1_projects_model import STEPS
from tests.parity.tf1_projects_model import assert_same
from tests.parity.tf1_projects_model import by_tf_name
from tests.parity.tf1_projects_model import fg_run
from tests.parity.tf1_projects_model import params
from tests.parity.tf1_projects_model import tf_loss

# --- optimize_loss, transcribed (see the module docstring) ------------------------------


def _contrib(tf, truncated_normal):
    """The original module's ``optimize_loss``, with the noise drawn by ``truncated_normal``."""
    tf1 = tf.compat.v1
    train = tf1.train

    OPTIMIZER_CLS_NAMES = {
        "Adagrad": train.AdagradOptimizer,
        "Adam": train.AdamOptimizer,
        "Ftrl": train.FtrlOptimizer,
        "Momentum": lambda learning_rate: train.MomentumOptimizer(learning_rate, momentum=0.9),
        "RMSProp": train.RMSPropOptimizer,
        "SGD": train.GradientDescentOptimizer,
    }
    OPTIMIZER_SUMMARIES = [
        "learning_rate",
        "loss",
        "gradients",
        "gradient_norm",
        "global_gradient_norm",
    ]

    def optimize_loss(
        loss,
        global_step,
        learning_rate,
        optimizer,
        gradient_noise_scale=None,
        gradient_multipliers=None,
        clip_gradients=None,
        learning_rate_decay_fn=None,
        update_ops=None,
        variables=None,
        name=None,
        summaries=None,
        colocate_gradients_with_ops=False,
        increment_global_step=True,
    ):
        loss = tf.convert_to_tensor(loss)
        if global_step is None:
            global_step = train.get_global_step()
        else:
            train.assert_global_step(global_step)
        with tf1.variable_scope(name, "OptimizeLoss", [loss, global_step]):
            if update_ops is None:
                update_ops = set(tf1.get_collection(tf1.GraphKeys.UPDATE_OPS))
            if update_ops:
                with tf.control_dependencies(list(update_ops)):
                    loss = tf.identity(loss)

            lr = None
            if learning_rate is not None:
                if isinstance(learning_rate, tf.Tensor) and learning_rate.get_shape().ndims == 0:
                    lr = learning_rate
                elif isinstance(learning_rate, float):
                    if learning_rate < 0.0:
                        raise ValueError("Invalid learning_rate %s.", learning_rate)
                    lr = tf1.get_variable(
                        "learning_rate",
                        [],
                        trainable=False,
                        initializer=tf1.constant_initializer(learning_rate),
                    )
                else:
                    raise ValueError(
                        "Learning rate should be 0d Tensor or float. "
                        "Got %s of type %s" % (str(learning_rate), str(type(learning_rate)))
                    )
            if summaries is None:
                summaries = ["loss", "learning_rate", "global_gradient_norm"]
            else:
                for summ in summaries:
                    if summ not in OPTIMIZER_SUMMARIES:
                        raise ValueError(
                            "Summaries should be one of [%s], you provided %s."
                            % (", ".join(OPTIMIZER_SUMMARIES), summ)
                        )
            if learning_rate is not None and learning_rate_decay_fn is not None:
                if global_step is None:
                    raise ValueError("global_step is required for learning_rate_decay_fn.")
                lr = learning_rate_decay_fn(lr, global_step)
                if "learning_rate" in summaries:
                    tf1.summary.scalar("learning_rate", lr)

            if isinstance(optimizer, str):
                if lr is None:
                    raise ValueError(
                        "Learning rate is None, but should be specified if "
                        "optimizer is string (%s)." % optimizer
                    )
                if optimizer not in OPTIMIZER_CLS_NAMES:
                    raise ValueError(
                        "Optimizer name should be one of [%s], you provided %s."
                        % (", ".join(OPTIMIZER_CLS_NAMES), optimizer)
                    )
                opt = OPTIMIZER_CLS_NAMES[optimizer](learning_rate=lr)
            elif isinstance(optimizer, type) and issubclass(optimizer, train.Optimizer):
                if lr is None:
                    raise ValueError(
                        "Learning rate is None, but should be specified if "
                        "optimizer is class (%s)." % optimizer
                    )
                opt = optimizer(learning_rate=lr)
            elif isinstance(optimizer, train.Optimizer):
                opt = optimizer
            elif callable(optimizer):
                if learning_rate is not None:
                    opt = optimizer(lr)
                else:
                    opt = optimizer()
                if not isinstance(opt, train.Optimizer):
                    raise ValueError(
                        "Unrecognized optimizer: function should return "
                        "subclass of Optimizer. Got %s." % str(opt)
                    )
            else:
                raise ValueError(
                    "Unrecognized optimizer: should be string, "
                    "subclass of Optimizer, instance of "
                    "subclass of Optimizer or function with one argument. "
                    "Got %s." % str(optimizer)
                )

            if variables is None:
                variables = tf1.trainable_variables()

            gradients = opt.compute_gradients(
                loss, variables, colocate_gradients_with_ops=colocate_gradients_with_ops
            )

            if gradient_noise_scale is not None:
                gradients = _add_scaled_noise_to_gradients(gradients, gradient_noise_scale)

            if gradient_multipliers is not None:
                gradients = _multiply_gradients(gradients, gradient_multipliers)
                if not gradients:
                    raise ValueError(
                        "Empty list of (gradient, var) pairs encountered. This is most "
                        "likely to be caused by an improper value of gradient_multipliers."
                    )

            if "global_gradient_norm" in summaries or "gradient_norm" in summaries:
                tf1.summary.scalar(
                    "global_norm/gradient_norm", tf.linalg.global_norm(list(zip(*gradients))[0])
                )

            if isinstance(clip_gradients, float):
                gradients = _clip_gradients_by_norm(gradients, clip_gradients)
            elif callable(clip_gradients):
                gradients = clip_gradients(gradients)
            elif clip_gradients is not None:
                raise ValueError("Unknown type %s for clip_gradients" % type(clip_gradients))

            if "loss" in summaries:
                tf1.summary.scalar("loss", loss)

            for gradient, variable in gradients:
                if isinstance(gradient, tf.IndexedSlices):
                    grad_values = gradient.values
                else:
                    grad_values = gradient

                if grad_values is not None:
                    var_name = variable.name.replace(":", "_")
                    if "gradients" in summaries:
                        tf1.summary.histogram("gradients/%s" % var_name, grad_values)
                    if "gradient_norm" in summaries:
                        tf1.summary.scalar(
                            "gradient_norm/%s" % var_name, tf.linalg.global_norm([grad_values])
                        )

            if clip_gradients is not None and (
                "global_gradient_norm" in summaries or "gradient_norm" in summaries
            ):
                tf1.summary.scalar(
                    "global_norm/clipped_gradient_norm",
                    tf.linalg.global_norm(list(zip(*gradients))[0]),
                )

            grad_updates = opt.apply_gradients(
                gradients,
                global_step=global_step if increment_global_step else None,
                name="train",
            )

            with tf.control_dependencies([grad_updates]):
                train_tensor = tf.identity(loss)

            return train_tensor

    def _clip_gradients_by_norm(grads_and_vars, clip_gradients):
        gradients, variables = zip(*grads_and_vars)
        clipped_gradients, _ = tf.clip_by_global_norm(gradients, clip_gradients)
        return list(zip(clipped_gradients, variables))

    def _add_scaled_noise_to_gradients(grads_and_vars, gradient_noise_scale):
        gradients, variables = zip(*grads_and_vars)
        noisy_gradients = []
        for gradient in gradients:
            if gradient is None:
                noisy_gradients.append(None)
                continue
            if isinstance(gradient, tf.IndexedSlices):
                gradient_shape = gradient.dense_shape
            else:
                gradient_shape = gradient.get_shape()
            noise = truncated_normal(gradient_shape) * gradient_noise_scale
            noisy_gradients.append(gradient + noise)
        return list(zip(noisy_gradients, variables))

    def _multiply_gradients(grads_and_vars, gradient_multipliers):
        multiplied_grads_and_vars = []
        for grad, var in grads_and_vars:
            if grad is not None and (
                var in gradient_multipliers or var.name in gradient_multipliers
            ):
                key = var if var in gradient_multipliers else var.name
                multiplier = tf.constant(gradient_multipliers[key], dtype=tf.float32)
                if isinstance(grad, tf.IndexedSlices):
                    grad_values = grad.values * multiplier
                    grad = tf.IndexedSlices(grad_values, grad.indices, grad.dense_shape)
                else:
                    grad *= multiplier
            multiplied_grads_and_vars.append((grad, var))
        return multiplied_grads_and_vars

    return optimize_loss


# --- the cases -------------------------------------------------------------------------

KEY = jax.random.key(11)
NOISE = 0.05


def _tf_options(tf, option):
    """TensorFlow's arguments of a case (built inside its graph, after the model)."""
    tf1 = tf.compat.v1
    by_name = {v.op.name: v for v in tf1.trainable_variables()}
    momentum = lambda lr: tf1.train.MomentumOptimizer(lr, 0.5, use_nesterov=True)  # noqa: E731
    return {
        "names": {},
        "class": {"optimizer": tf1.train.AdagradOptimizer},
        "instance": {"learning_rate": None, "optimizer": tf1.train.MomentumOptimizer(0.05, 0.5)},
        "function": {"optimizer": momentum},
        "function_of_nothing": {"learning_rate": None, "optimizer": lambda: momentum(0.05)},
        "decay_fn": {
            "learning_rate_decay_fn": lambda lr, gs: tf1.train.exponential_decay(
                lr, gs, 2, 0.5, staircase=True
            )
        },
        "clip_float": {"clip_gradients": 0.1},
        "clip_callable": {
            "clip_gradients": lambda gvs: [(tf.clip_by_norm(g, 0.05), v) for g, v in gvs]
        },
        "multipliers": {
            "gradient_multipliers": {
                "dense/kernel:0": 0.5,
                by_name["embeddings/word_embeddings"]: 3.0,
            }
        },
        "no_increment": {
            "increment_global_step": False,
            "learning_rate_decay_fn": lambda lr, gs: lr / tf.cast(gs + 1, tf.float32),
        },
        "variables": {"variables": [by_name["dense/kernel"], by_name["LayerNorm/gamma"]]},
        "noise": {"gradient_noise_scale": NOISE},
        "all": {
            "gradient_noise_scale": NOISE,
            "gradient_multipliers": {"dense/kernel:0": 4.0},
            "clip_gradients": 0.2,
        },
    }[option]


def _fg_options(option):
    momentum = lambda lr: fg.train.MomentumOptimizer(lr, 0.5, use_nesterov=True)  # noqa: E731
    return {
        "names": {},
        "class": {"optimizer": fg.train.AdagradOptimizer},
        "instance": {
            "learning_rate": None,
            "optimizer": fg.train.MomentumOptimizer(0.05, 0.5),
        },
        "function": {"optimizer": momentum},
        "function_of_nothing": {"learning_rate": None, "optimizer": lambda: momentum(0.05)},
        "decay_fn": {
            "learning_rate_decay_fn": lambda lr, step: fg.train.exponential_decay(
                lr, 2, 0.5, staircase=True
            )(step)
        },
        "clip_float": {"clip_gradients": 0.1},
        "clip_callable": {
            "clip_gradients": lambda gvs: [(fg.clip_by_norm(g, 0.05), v) for g, v in gvs]
        },
        "multipliers": {
            "gradient_multipliers": {"dense/kernel": 0.5, "embeddings/word_embeddings": 3.0}
        },
        "no_increment": {
            "increment_global_step": False,
            "learning_rate_decay_fn": lambda lr, step: lr / (step + 1).astype(jnp.float32),
        },
        "variables": {"variables": ["dense/kernel", "LayerNorm/gamma"]},
        "noise": {"gradient_noise_scale": NOISE, "key": KEY},
        "all": {
            "gradient_noise_scale": NOISE,
            "key": KEY,
            "gradient_multipliers": {"dense/kernel": 4.0},
            "clip_gradients": 0.2,
        },
    }[option]


#: (optimizer name, option): every name plain, and each option with an optimizer whose
#: slots show it (Adam's moments and powers, Momentum's accumulator, Ftrl's two slots).
CASES = [(name, "names") for name in ("Adagrad", "Adam", "Ftrl", "Momentum", "RMSProp", "SGD")] + [
    ("Adagrad", "class"),
    (None, "instance"),
    (None, "function"),
    (None, "function_of_nothing"),
    ("Adam", "decay_fn"),
    ("Momentum", "clip_float"),
    ("Adam", "clip_callable"),
    ("RMSProp", "multipliers"),
    ("Adam", "no_increment"),
    ("Ftrl", "variables"),
    ("Adam", "noise"),
    ("Momentum", "all"),
]
RATE = 0.05


def _noise(name, shape, step):
    """The unscaled noise funcgrad adds to ``name``'s gradient at ``step`` (the documented
    rule), for TensorFlow's placeholder."""
    i = fg.train.variable_names(params()).index(name)
    step_key = jax.random.fold_in(KEY, step)
    return np.asarray(
        jax.random.truncated_normal(jax.random.fold_in(step_key, i), -2.0, 2.0, shape)
    )


def _tf_graph(tf, name, option):
    """The case's graph: its train op, and the noise placeholders with their variables."""
    tf1 = tf.compat.v1
    global_step = tf1.train.get_or_create_global_step()
    loss = tf_loss(tf)
    fed = []  # placeholders, in the order the noise is drawn: that of the variables

    def truncated_normal(shape):
        static = tf.get_static_value(shape) if isinstance(shape, tf.Tensor) else shape
        placeholder = tf1.placeholder(tf.float32, static)
        fed.append(placeholder)
        return placeholder

    options = {"learning_rate": RATE, "optimizer": name, **_tf_options(tf, option)}
    variables = options.get("variables") or tf1.trainable_variables()
    train_op = _contrib(tf, truncated_normal)(loss, global_step, **options)
    return train_op, list(zip(fed, [v.op.name for v in variables] if fed else [], strict=True))


def _tf_steps(tf, sess, train_op, noisy, steps):
    """Run ``steps`` (global step numbers) of the train op, feeding funcgrad's noise."""
    for step in steps:
        sess.run(train_op, {p: _noise(n, p.shape, step) for p, n in noisy})


_TF_RUNS: dict = {}


def _tf_run(tf, tmp_path_factory, name, option):
    """Every TensorFlow variable by name after each step, and a Saver checkpoint after the
    third (run once per case)."""
    if (name, option) not in _TF_RUNS:
        tf1 = tf.compat.v1
        prefix = str(tmp_path_factory.mktemp(option) / "model.ckpt-3")
        with tf.Graph().as_default():
            train_op, noisy = _tf_graph(tf, name, option)
            with tf1.Session() as sess:
                sess.run(tf1.global_variables_initializer())
                trajectory = []
                for step in range(STEPS):
                    _tf_steps(tf, sess, train_op, noisy, [step])
                    trajectory.append({v.op.name: sess.run(v) for v in tf1.global_variables()})
                    if step == 2:
                        tf1.train.Saver().save(sess, prefix)
        _TF_RUNS[name, option] = trajectory, prefix
    return _TF_RUNS[name, option]


def _tf_continue(tf, prefix, name, option):
    """TensorFlow restored from ``prefix`` (step 3), run to the last step."""
    tf1 = tf.compat.v1
    with tf.Graph().as_default():
        train_op, noisy = _tf_graph(tf, name, option)
        with tf1.Session() as sess:
            tf1.train.Saver().restore(sess, prefix)
            _tf_steps(tf, sess, train_op, noisy, range(3, STEPS))
            return {v.op.name: sess.run(v) for v in tf1.global_variables()}


def _fg_case(name, option):
    opt = fg.train.optimize_loss(
        **{"learning_rate": RATE, "optimizer": name, **_fg_options(option)}
    )
    return opt, lambda loss, state: opt.minimize(loss, state)[0]


IDS = [f"{n}-{o}" for n, o in CASES]


@pytest.mark.parametrize(("name", "option"), CASES, ids=IDS)
def test_every_variable_and_slot_by_name_each_step(
    tf, tmp_path, tmp_path_factory, name, option
) -> None:
    trajectory, _ = _tf_run(tf, tmp_path_factory, name, option)
    opt, train_op = _fg_case(name, option)
    for state, want in zip(fg_run(opt.init(params()), train_op, STEPS), trajectory, strict=True):
        assert_same(by_tf_name(tf, tmp_path, state, opt), want)
    steps = [int(t["global_step"]) for t in trajectory]
    assert steps == ([0] * STEPS if option == "no_increment" else list(range(1, STEPS + 1)))


@pytest.mark.parametrize(("name", "option"), CASES, ids=IDS)
def test_resume_from_a_tensorflow_checkpoint_and_the_other_way(
    tf, tmp_path, tmp_path_factory, name, option
) -> None:
    trajectory, tf_prefix = _tf_run(tf, tmp_path_factory, name, option)
    opt, train_op = _fg_case(name, option)
    restored = fg.train.restore_tf_checkpoint(tf_prefix, opt.init(params()), opt)
    if option == "names":  # the held rate is OptimizeLoss/learning_rate's
        moved = fg.train.set_learning_rate(opt.init(params()), 1.0)
        again = fg.train.restore_tf_checkpoint(tf_prefix, moved, opt)
        assert float(again.opt_state.learning_rate) == np.float32(RATE)
    resumed = fg_run(restored, train_op, STEPS - 3)[-1]
    assert_same(by_tf_name(tf, tmp_path, resumed, opt), trajectory[-1])

    own = fg_run(opt.init(params()), train_op, 3)[-1]
    fg_prefix = fg.train.save_tf_checkpoint(str(tmp_path / "own" / "model.ckpt-3"), own, opt)
    assert_same(_tf_continue(tf, fg_prefix, name, option), trajectory[-1])


def test_noise_is_tensorflows_truncated_normal(tf) -> None:
    """The noise's distribution: TensorFlow's ``truncated_normal`` and JAX's over
    ``[-2, 2]`` agree in their bounds, moments and quantiles (200,000 draws each)."""
    n = 200_000
    want = tf.random.truncated_normal([n], seed=1).numpy().astype(np.float64)
    got = np.asarray(jax.random.truncated_normal(KEY, -2.0, 2.0, (n,)), np.float64)
    std = 0.8796256610342398  # of the standard normal truncated to [-2, 2]
    for sample in (want, got):
        assert np.abs(sample).max() <= 2.0
        assert abs(sample.mean()) < 5 * std / np.sqrt(n)
        assert abs(sample.std() - std) < 0.005
    quantiles = np.linspace(0.05, 0.95, 19)
    np.testing.assert_allclose(np.quantile(got, quantiles), np.quantile(want, quantiles), atol=0.02)
