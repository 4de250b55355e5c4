"""fg.train.accumulate_gradients and fg.train.minimize_in_microbatches."""

import chex
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import funcgrad as fg

K = 4


def loss_fn(params, x, y):
    return jnp.mean((x @ params["w"] + params["b"] - y) ** 2)


def make_data(n, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 3)).astype(np.float32)
    y = rng.normal(size=(n,)).astype(np.float32)
    return jnp.asarray(x), jnp.asarray(y)


grad_fn = jax.jit(jax.grad(loss_fn))
PARAMS = {"w": jnp.array([0.5, -1.0, 2.0]), "b": jnp.float32(0.25)}


def decaying(step):
    return 0.1 / (1.0 + step.astype(jnp.float32))


OPTIMIZERS = [
    pytest.param(lambda: fg.train.GradientDescentOptimizer(0.1), id="sgd"),
    pytest.param(lambda: fg.train.GradientDescentOptimizer(decaying), id="sgd_schedule"),
    pytest.param(lambda: fg.train.MomentumOptimizer(0.05, 0.9), id="momentum"),
    pytest.param(lambda: fg.train.MomentumOptimizer(0.05, 0.9, use_nesterov=True), id="nesterov"),
    pytest.param(lambda: fg.train.AdamOptimizer(0.05), id="adam"),
    pytest.param(lambda: fg.train.AdamOptimizer(decaying), id="adam_schedule"),
    pytest.param(lambda: fg.train.RMSPropOptimizer(0.01), id="rmsprop"),
    pytest.param(
        lambda: fg.train.RMSPropOptimizer(0.01, momentum=0.5, centered=True), id="rmsprop_centered"
    ),
    pytest.param(lambda: fg.train.AdagradOptimizer(0.1), id="adagrad"),
    pytest.param(lambda: fg.train.AdadeltaOptimizer(1.0), id="adadelta"),
    pytest.param(lambda: fg.train.FtrlOptimizer(0.1), id="ftrl"),
    pytest.param(
        lambda: fg.train.ProximalGradientDescentOptimizer(0.1, l1_regularization_strength=0.01),
        id="proximal_sgd",
    ),
    pytest.param(
        lambda: fg.train.ProximalAdagradOptimizer(0.1, l2_regularization_strength=0.01),
        id="proximal_adagrad",
    ),
]


@pytest.mark.parametrize("make_opt", OPTIMIZERS)
def test_k_step_accumulation_equals_mean_gradient_steps(make_opt):
    opt = make_opt()
    acc = fg.train.Optimizer(fg.train.accumulate_gradients(opt.tx, K))
    x, y = make_data(3 * K * 5)
    micro = [(x[i : i + 5], y[i : i + 5]) for i in range(0, len(x), 5)]
    acc_step = jax.jit(lambda s, xb, yb: acc.minimize(loss_fn, s, xb, yb)[0])
    ref_step = jax.jit(lambda s, g: opt.apply_gradients(list(zip(g, [None] * 2, strict=True)), s))
    acc_state, ref_state = acc.init(PARAMS), opt.init(PARAMS)
    for update in range(3):
        chunk = micro[update * K : (update + 1) * K]
        for i, (xb, yb) in enumerate(chunk):
            before = acc_state.params
            acc_state = acc_step(acc_state, xb, yb)
            if i < K - 1:  # nothing moves until the k-th micro-batch
                chex.assert_trees_all_equal(acc_state.params, before)
        # The reference: one step on the mean of the k gradients (plain jax.grad).
        grads = [grad_fn(ref_state.params, xb, yb) for xb, yb in chunk]
        mean = jax.tree.map(lambda *g: sum(g[1:], g[0]) / K, *grads)
        ref_state = ref_step(ref_state, jax.tree.leaves(mean))
        chex.assert_trees_all_close(acc_state.params, ref_state.params, rtol=1e-6, atol=1e-7)
    assert int(acc_state.global_step) == 3 * K  # global_step counts micro-batches
    assert int(acc_state.opt_state.applied_steps) == 3  # the schedule sees applied updates


def test_inner_update_runs_only_on_the_kth_call_unlike_multisteps():
    # The memory and compute of optax#472: MultiSteps runs the inner update every call.
    calls = []

    def counting(tag):
        def update(updates, state, params=None):
            jax.debug.callback(lambda: calls.append(tag))
            return updates, state

        return optax.GradientTransformation(lambda p: optax.EmptyState(), update)

    ours = fg.train.accumulate_gradients(counting("ours"), K)
    theirs = optax.MultiSteps(counting("multisteps"), K)
    g = {"w": jnp.ones(3)}
    s_ours, s_theirs = ours.init(g), theirs.init(g)
    for _ in range(2 * K):
        _, s_ours = jax.jit(ours.update)(g, s_ours)
        with jax.numpy_dtype_promotion("standard"):  # MultiSteps mixes int32 and float32
            _, s_theirs = jax.jit(theirs.update)(g, s_theirs)
    jax.effects_barrier()
    assert calls.count("ours") == 2
    assert calls.count("multisteps") == 2 * K


def test_accumulation_works_under_vmap_and_jit_once():
    opt = fg.train.AdamOptimizer(0.1)
    acc = fg.train.Optimizer(fg.train.accumulate_gradients(opt.tx, 2))
    x, y = make_data(8)
    scales = jnp.array([1.0, 2.0])

    @jax.jit
    @chex.assert_max_traces(n=1)
    def step(states, xb, yb):
        return jax.vmap(lambda s, c: acc.minimize(loss_fn, s, xb * c, yb)[0])(states, scales)

    states = jax.vmap(lambda c: acc.init(jax.tree.map(lambda p: p * c, PARAMS)))(scales)
    for i in range(4):
        states = step(states, x[2 * i : 2 * i + 2], y[2 * i : 2 * i + 2])
    one_step = jax.jit(lambda s, xb, yb: acc.minimize(loss_fn, s, xb, yb)[0])
    for j, c in enumerate(scales):
        one = acc.init(jax.tree.map(lambda p, c=c: p * c, PARAMS))
        for i in range(4):
            one = one_step(one, x[2 * i : 2 * i + 2] * c, y[2 * i : 2 * i + 2])
        chex.assert_trees_all_close(
            jax.tree.map(lambda a, j=j: a[j], states.params), one.params, rtol=1e-6
        )


@pytest.mark.parametrize("make_opt", OPTIMIZERS[4:6])
def test_microbatched_step_equals_one_step_on_the_whole_batch(make_opt):
    chex.clear_trace_counter()
    opt = make_opt()
    x, y = make_data(16)
    state = opt.init(PARAMS)
    step = jax.jit(
        chex.assert_max_traces(
            lambda s, x, y: fg.train.minimize_in_microbatches(
                opt, loss_fn, s, x, y, num_microbatches=K
            ),
            n=1,
        )
    )
    whole_step = jax.jit(lambda s, x, y: opt.minimize(loss_fn, s, x, y))
    ours, whole = state, state
    for _ in range(3):
        ours, loss = step(ours, x, y)
        whole, whole_loss = whole_step(whole, x, y)
        np.testing.assert_allclose(loss, whole_loss, rtol=1e-6)
    chex.assert_trees_all_close(ours.params, whole.params, rtol=1e-6, atol=1e-7)
    assert int(ours.global_step) == 3  # one update per call


def test_microbatched_step_under_vmap_and_with_an_unused_parameter():
    opt = fg.train.GradientDescentOptimizer(0.1)
    params = {**PARAMS, "unused": jnp.ones(2)}
    x, y = make_data(8)
    states = jax.vmap(lambda c: opt.init(jax.tree.map(lambda p: p * c, params)))(
        jnp.array([1.0, 3.0])
    )
    new, losses = jax.jit(
        jax.vmap(
            lambda s: fg.train.minimize_in_microbatches(opt, loss_fn, s, x, y, num_microbatches=2)
        )
    )(states)
    expected = jax.jit(jax.vmap(lambda s: opt.minimize(loss_fn, s, x, y)))(states)
    chex.assert_trees_all_close(new.params, expected[0].params, rtol=1e-6)
    np.testing.assert_allclose(losses, expected[1], rtol=1e-6)
    chex.assert_trees_all_equal(new.params["unused"], states.params["unused"])


@pytest.mark.parametrize(
    ("k", "error"),
    [
        pytest.param(0, ValueError, id="zero"),
        pytest.param(-2, ValueError, id="negative"),
        pytest.param(2.0, TypeError, id="float"),
        pytest.param(True, TypeError, id="bool"),
    ],
)
def test_k_below_one_or_not_an_integer_is_an_error(k, error):
    with pytest.raises(
        error, match=r"accumulate_gradients\(tx, every_k\).*every_k must be an integer >= 1"
    ):
        fg.train.accumulate_gradients(optax.sgd(0.1), k)
    state = fg.train.GradientDescentOptimizer(0.1).init(PARAMS)
    with pytest.raises(error, match=r"minimize_in_microbatches.*num_microbatches must be"):
        fg.train.minimize_in_microbatches(
            fg.train.GradientDescentOptimizer(0.1),
            loss_fn,
            state,
            *make_data(8),
            num_microbatches=k,
        )


@pytest.mark.parametrize(
    "batch",
    [
        pytest.param(make_data(10), id="not_divisible"),
        pytest.param((jnp.ones((8, 3)), jnp.float32(1.0)), id="scalar_leaf"),
        pytest.param((), id="empty"),
    ],
)
def test_batch_that_does_not_split_into_k_is_an_error(batch):
    opt = fg.train.GradientDescentOptimizer(0.1)
    state = opt.init(PARAMS)
    with pytest.raises(ValueError, match=r"leading axis divisible by num_microbatches=4"):
        fg.train.minimize_in_microbatches(opt, loss_fn, state, *batch, num_microbatches=K)


@pytest.mark.parametrize("make_opt", [OPTIMIZERS[0], OPTIMIZERS[5]])
def test_microbatches_over_an_accumulating_optimizer_follow_its_every_kth_call_schedule(make_opt):
    # minimize_in_microbatches applies once per call, so over accumulate_gradients(tx, K)
    # each call is one of the wrapper's K calls, exactly as one minimize on the whole batch.
    opt = make_opt()
    acc = fg.train.Optimizer(fg.train.accumulate_gradients(opt.tx, K))
    x, y = make_data(2 * K * 8)
    batches = [(x[i : i + 8], y[i : i + 8]) for i in range(0, len(x), 8)]
    micro_step = jax.jit(
        lambda s, xb, yb: fg.train.minimize_in_microbatches(
            acc, loss_fn, s, xb, yb, num_microbatches=2
        )
    )
    plain_step = jax.jit(lambda s, xb, yb: acc.minimize(loss_fn, s, xb, yb))
    micro = plain = acc.init(PARAMS)
    reference = opt.init(PARAMS)
    for update in range(2):
        for i in range(K):
            before = micro.params
            micro, micro_loss = micro_step(micro, *batches[update * K + i])
            plain, plain_loss = plain_step(plain, *batches[update * K + i])
            np.testing.assert_allclose(micro_loss, plain_loss, rtol=1e-6)
            chex.assert_trees_all_close(micro.params, plain.params, rtol=1e-6, atol=1e-7)
            if i < K - 1:  # nothing moves until the k-th call
                chex.assert_trees_all_equal(micro.params, before)
        # One plain step on all the examples of those K calls.
        union = slice(update * K * 8, (update + 1) * K * 8)
        reference, _ = opt.minimize(loss_fn, reference, x[union], y[union])
        chex.assert_trees_all_close(micro.params, reference.params, rtol=1e-6, atol=1e-7)
    assert int(micro.global_step) == 2 * K
    assert int(micro.opt_state.applied_steps) == 2
