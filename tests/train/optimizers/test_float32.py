"""bfloat16 parameters: every TF1 optimizer follows its float32 trajectory to bfloat16 rounding.

The optimizers compute in float32 and store bfloat16 (``funcgrad.train.optimizers._float32``);
TensorFlow computes in the variable's dtype, where ``1 - bfloat16(0.999) == 0`` and
Adam diverges from its first step.  The reference is the same optimizer run on float32
parameters from the same (bfloat16-exact) start.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import funcgrad as fg

# Each step rounds the parameter to bfloat16 (half a spacing, 2**-9 of its size) and
# computes its update from the rounded value; 2**-8 of the parameters' size per step
# bounds what that can add up to over a run that is not chaotic (no oscillation about
# a minimum: 20 steps stay far from it).
STEPS = 20
PER_STEP = 2.0**-8

OPTIMIZERS = [
    pytest.param(lambda: fg.train.GradientDescentOptimizer(0.05), id="sgd"),
    pytest.param(lambda: fg.train.MomentumOptimizer(0.02, 0.9), id="momentum"),
    pytest.param(lambda: fg.train.MomentumOptimizer(0.02, 0.9, use_nesterov=True), id="nesterov"),
    pytest.param(lambda: fg.train.AdamOptimizer(0.05), id="adam"),
    pytest.param(lambda: fg.train.AdamOptimizer(0.05, beta2=0.99999), id="adam_beta2_near_1"),
    pytest.param(lambda: fg.train.RMSPropOptimizer(0.02, momentum=0.5), id="rmsprop"),
    pytest.param(lambda: fg.train.RMSPropOptimizer(0.02, decay=0.999), id="rmsprop_decay_near_1"),
    pytest.param(lambda: fg.train.RMSPropOptimizer(0.02, centered=True), id="rmsprop_centered"),
    pytest.param(lambda: fg.train.AdagradOptimizer(0.1), id="adagrad"),
    pytest.param(lambda: fg.train.AdadeltaOptimizer(10.0, rho=0.9, epsilon=1e-4), id="adadelta"),
    pytest.param(lambda: fg.train.FtrlOptimizer(0.1, l1_regularization_strength=0.01), id="ftrl"),
    pytest.param(
        lambda: fg.train.ProximalGradientDescentOptimizer(0.05, 0.01, 0.01), id="proximal_sgd"
    ),
    pytest.param(lambda: fg.train.ProximalAdagradOptimizer(0.1, 0.1, 0.01), id="proximal_adagrad"),
]

X = jax.random.normal(jax.random.key(0), (16, 4))
Y = X @ jnp.array([3.0, -2.0, 4.0, -3.0])
W0 = jnp.array([1.0, -0.5, 0.25, 2.0])  # exact in bfloat16


def _loss(w, x, y):
    """Least squares computed in float32 whatever the parameters' dtype."""
    return 0.5 * jnp.mean((x @ w.astype(jnp.float32) - y) ** 2)


def _trajectory(opt, dtype):
    step = jax.jit(lambda s: opt.minimize(_loss, s, X, Y))
    state = opt.init(W0.astype(dtype))
    points, losses = [], []
    for _ in range(STEPS):
        state, loss = step(state)
        points.append(np.asarray(state.params, np.float32))
        losses.append(float(loss))
    return state, np.array(points), np.array(losses)


@pytest.mark.parametrize("make", OPTIMIZERS)
def test_bfloat16_follows_the_float32_trajectory_to_bfloat16_rounding(make):
    opt = make()
    _, reference, reference_losses = _trajectory(opt, jnp.float32)
    state, points, losses = _trajectory(opt, jnp.bfloat16)
    scale = np.abs(reference).max()
    for t, (got, want) in enumerate(zip(points, reference, strict=True), start=1):
        np.testing.assert_allclose(
            got, want, rtol=0, atol=t * PER_STEP * scale, err_msg=f"step {t}"
        )
    assert reference_losses[-1] < 0.9 * reference_losses[0]  # the runs really train
    np.testing.assert_allclose(losses[-1], reference_losses[-1], rtol=STEPS * PER_STEP)
    assert state.params.dtype == jnp.bfloat16
    floats = [s for s in jax.tree.leaves(state.opt_state) if s.shape == W0.shape]
    assert all(s.dtype == jnp.bfloat16 for s in floats)  # slots stay bfloat16, as in TF


def test_adam_first_step_on_bfloat16_is_the_learning_rate_not_a_blow_up():
    # 1 - bfloat16(0.999) == 0: computed in bfloat16, nu stays 0 and the step is m / eps.
    assert float(1 - jnp.bfloat16(0.999)) == 0.0
    opt = fg.train.AdamOptimizer(0.1)
    w = jnp.array([1.0, -0.5], jnp.bfloat16)
    state, _ = opt.minimize(lambda w: jnp.sum(w.astype(jnp.float32) ** 2), opt.init(w))
    np.testing.assert_allclose(state.params.astype(jnp.float32), [0.9, -0.4], rtol=2**-8)
    adam_state = state.opt_state.inner_state[0]
    # nu = (1 - beta2) g**2 with g = 2w, stored in bfloat16.
    np.testing.assert_allclose(adam_state.nu.astype(jnp.float32), [0.004, 0.001], rtol=2**-8)


def test_scale_by_tf_adam_alone_computes_in_float32_and_stores_bfloat16():
    tx = fg.train.scale_by_tf_adam()
    g = jnp.array([0.5, -2.0], jnp.bfloat16)
    updates, state = tx.update(g, tx.init(g))
    assert updates.dtype == state.mu.dtype == state.nu.dtype == jnp.bfloat16
    np.testing.assert_allclose(updates.astype(jnp.float32), [1.0, -1.0], rtol=2**-8)
    np.testing.assert_allclose(state.nu.astype(jnp.float32), [0.00025, 0.004], rtol=2**-8)


@pytest.mark.parametrize(
    "tx",
    [
        pytest.param(lambda: fg.train.tf_ftrl(0.1, l1=0.01), id="ftrl"),
        pytest.param(lambda: fg.train.tf_proximal_gradient_descent(0.1, 0.01), id="proximal_sgd"),
        pytest.param(lambda: fg.train.tf_proximal_adagrad(0.1, 0.1, 0.01), id="proximal_adagrad"),
    ],
)
def test_tf_transforms_alone_give_the_float32_step_rounded_to_bfloat16(tx):
    w = jnp.array([1.0, -0.5, 0.25], jnp.float32)
    g = jnp.array([0.3, -0.2, 0.1], jnp.float32)
    t = tx()
    want, _ = t.update(g, t.init(w), w)
    got, state = t.update(
        g.astype(jnp.bfloat16), t.init(w.astype(jnp.bfloat16)), w.astype(jnp.bfloat16)
    )
    assert got.dtype == jnp.bfloat16
    assert all(s.dtype == jnp.bfloat16 for s in jax.tree.leaves(state))
    np.testing.assert_allclose(got.astype(jnp.float32), want, rtol=2**-8, atol=2**-9 * 1.0)


def test_bfloat16_and_float32_parameters_share_one_optimizer():
    opt = fg.train.AdamOptimizer(0.05)
    params = {"half": W0.astype(jnp.bfloat16), "full": W0}

    def loss(p, x, y):
        return _loss(p["half"], x, y) + _loss(p["full"], x, y)

    step = jax.jit(lambda s: opt.minimize(loss, s, X, Y)[0])
    state = opt.init(params)
    for _ in range(STEPS):
        state = step(state)
    _, reference, _ = _trajectory(opt, jnp.float32)
    np.testing.assert_array_equal(state.params["full"], reference[-1])  # float32: unchanged
    np.testing.assert_allclose(
        state.params["half"].astype(jnp.float32), reference[-1], atol=STEPS * PER_STEP * 4
    )
