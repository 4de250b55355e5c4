"""OptimizerGroup: a GAN's alternating D and G optimizers and an A3C-style shared trunk,
each against the same program written with plain jax.grad and optax over the right
subsets of the variables."""

import chex
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import funcgrad as fg
from tests.train_steps import JIT
from tests.train_steps import compiled

# optax.adam raises powers of Python floats to int32 counts, which the strict harness
# refuses; its reference runs (and ours with it) use standard promotion.
standard_promotion = jax.numpy_dtype_promotion("standard")

_key = iter(jax.random.split(jax.random.key(0), 16))
GAN_PARAMS = {
    "D": {
        "W1": jax.random.normal(next(_key), (1, 4)),
        "b1": jnp.zeros(4),
        "W2": jax.random.normal(next(_key), (4, 1)),
        "b2": jnp.zeros(1),
    },
    "G": {"a": jnp.ones((1, 1)), "c": jnp.zeros(1)},
}
REAL = 3.0 + 0.5 * jax.random.normal(next(_key), (8, 1))
NOISE = jax.random.normal(next(_key), (3, 8, 1))


def _discriminate(d, x):
    h = jnp.tanh(x @ d["W1"] + d["b1"][None, :])
    return (h @ d["W2"] + d["b2"][None, :])[:, 0]  # logits


def _generate(g, z):
    return z @ g["a"] + g["c"][None, :]


def d_loss(params, real, z):
    fake = _generate(params["G"], z)
    return -jnp.mean(
        jax.nn.log_sigmoid(_discriminate(params["D"], real))
        + jax.nn.log_sigmoid(-_discriminate(params["D"], fake))
    )


def g_loss(params, z):
    return -jnp.mean(jax.nn.log_sigmoid(_discriminate(params["D"], _generate(params["G"], z))))


def _gan_group():
    return fg.train.OptimizerGroup(
        D=(fg.train.Optimizer(optax.adam(0.05, b1=0.5)), {"D": True, "G": False}),
        G=(fg.train.Optimizer(optax.adam(0.05, b1=0.5)), lambda name, _: name.startswith("G/")),
    )


def _optax_step(tx, loss_of, sub, tx_state):
    """One plain jax.value_and_grad + optax step of ``loss_of(sub)``."""
    loss, grads = jax.value_and_grad(loss_of)(sub)
    updates, tx_state = tx.update(grads, tx_state, sub)
    return loss, optax.apply_updates(sub, updates), tx_state


@JIT
def test_gan_alternating_steps_equal_plain_optax_on_each_subset(jit) -> None:
    gan = _gan_group()
    d_step = compiled(lambda s, real, z: gan["D"].minimize(d_loss, s, real, z), jit)
    g_step = compiled(lambda s, z: gan["G"].minimize(g_loss, s, z), jit)
    d_tx, g_tx = optax.adam(0.05, b1=0.5), optax.adam(0.05, b1=0.5)
    d, g = GAN_PARAMS["D"], GAN_PARAMS["G"]
    with standard_promotion:
        state = gan.init(GAN_PARAMS)
        d_opt, g_opt = d_tx.init(d), g_tx.init(g)
        for z in NOISE:
            state, dl = d_step(state, REAL, z)
            ref_dl, d, d_opt = _optax_step(
                d_tx, lambda d, g=g, z=z: d_loss({"D": d, "G": g}, REAL, z), d, d_opt
            )
            state, gl = g_step(state, z)
            ref_gl, g, g_opt = _optax_step(
                g_tx, lambda g, d=d, z=z: g_loss({"D": d, "G": g}, z), g, g_opt
            )
            np.testing.assert_allclose([dl, gl], [ref_dl, ref_gl], rtol=1e-5)
            chex.assert_trees_all_close(state.params, {"D": d, "G": g}, rtol=1e-5, atol=1e-6)
    assert int(state.global_step) == 2 * len(NOISE)  # one shared step count
    # Each optimizer has slots for its own variables only, and its own Adam count.
    assert jax.tree.leaves(state.opt_state["D"][0].mu["G"]) == []
    assert jax.tree.leaves(state.opt_state["G"][0].nu["D"]) == []
    assert int(state.opt_state["D"][0].count) == len(NOISE)


def test_a_step_changes_only_its_variables_and_its_slots() -> None:
    gan = _gan_group()
    with standard_promotion:
        state = gan.init(GAN_PARAMS)
        after, _ = gan["D"].minimize(d_loss, state, REAL, NOISE[0])
    chex.assert_trees_all_equal(after.params["G"], state.params["G"])
    chex.assert_trees_all_equal(after.opt_state["G"], state.opt_state["G"])
    assert not np.allclose(after.params["D"]["W1"], state.params["D"]["W1"])


# --- A3C: a policy and a value head on a shared trunk, one optimizer each ----------

A3C_PARAMS = {
    "trunk": {"W": 0.5 * jax.random.normal(next(_key), (3, 4)), "b": jnp.zeros(4)},
    "pi": {"W": 0.5 * jax.random.normal(next(_key), (4, 2))},
    "v": {"W": 0.5 * jax.random.normal(next(_key), (4, 1))},
}
OBS = jax.random.normal(next(_key), (6, 3))
ACTIONS = jnp.array([0, 1, 1, 0, 1, 0])
RETURNS = jnp.array([1.0, 0.5, -0.2, 0.8, 0.0, 1.2])


def _heads(params, obs):
    h = jnp.tanh(obs @ params["trunk"]["W"] + params["trunk"]["b"][None, :])
    return jax.nn.log_softmax(h @ params["pi"]["W"]), (h @ params["v"]["W"])[:, 0]


def policy_loss(params, obs, actions, returns):
    log_pi, value = _heads(params, obs)
    advantage = returns - jax.lax.stop_gradient(value)
    taken = jnp.take_along_axis(log_pi, actions[:, None], axis=1)[:, 0]
    entropy = -jnp.sum(jnp.exp(log_pi) * log_pi, axis=1)
    return -jnp.mean(taken * advantage) - 0.01 * jnp.mean(entropy)


def value_loss(params, obs, returns):
    return jnp.mean((returns - _heads(params, obs)[1]) ** 2)


def _a3c_reference(steps, stale_value_head=False):
    """Plain optax: RMSProp on (trunk, pi), Adam on (trunk, v); the trunk is shared."""
    pi_tx, v_tx = optax.rmsprop(0.05), optax.adam(0.05)
    p = A3C_PARAMS
    pi_sub, v_sub = ("trunk", "pi"), ("trunk", "v")
    pi_opt = pi_tx.init({k: p[k] for k in pi_sub})
    v_opt = v_tx.init({k: p[k] for k in v_sub})
    for _ in range(steps):
        before = p
        sub = {k: p[k] for k in pi_sub}
        _, new, pi_opt = _optax_step(
            pi_tx, lambda s, p=p: policy_loss({**p, **s}, OBS, ACTIONS, RETURNS), sub, pi_opt
        )
        p = {**p, **new}
        seen = {**p, "trunk": before["trunk"]} if stale_value_head else p
        sub = {k: seen[k] for k in v_sub}
        _, new, v_opt = _optax_step(
            v_tx, lambda s, seen=seen: value_loss({**seen, **s}, OBS, RETURNS), sub, v_opt
        )
        p = {**p, **new}
    return p


@JIT
def test_a3c_shared_trunk_equals_plain_optax_and_no_head_is_stale(jit) -> None:
    a3c = fg.train.OptimizerGroup(
        policy=(fg.train.Optimizer(optax.rmsprop(0.05)), lambda name, _: not name.startswith("v/")),
        value=(fg.train.Optimizer(optax.adam(0.05)), ["trunk/W", "trunk/b", "v/W"]),
    )

    def step(state, obs, actions, returns):
        state, _ = a3c["policy"].minimize(policy_loss, state, obs, actions, returns)
        return a3c["value"].minimize(value_loss, state, obs, returns)

    step = compiled(step, jit)
    with standard_promotion:
        state = a3c.init(A3C_PARAMS)
        for _ in range(3):
            state, _ = step(state, OBS, ACTIONS, RETURNS)
        expected = _a3c_reference(3)
        stale = _a3c_reference(3, stale_value_head=True)
    chex.assert_trees_all_close(state.params, expected, rtol=1e-5, atol=1e-6)
    # The reference can tell: a value head trained on the pre-policy-step trunk differs.
    assert not np.allclose(stale["v"]["W"], expected["v"]["W"], rtol=1e-4)
    assert int(state.global_step) == 6


def test_schedules_read_the_shared_global_step() -> None:
    def rate(step):
        return 1.0 / (1.0 + step.astype(jnp.float32))

    group = fg.train.OptimizerGroup(
        a=(fg.train.GradientDescentOptimizer(rate), ["a"]),
        b=(fg.train.GradientDescentOptimizer(rate), ["b"]),
    )
    state = group.init({"a": jnp.float32(0.0), "b": jnp.float32(0.0)})
    for _ in range(2):
        state, _ = group["a"].minimize(lambda p: p["a"], state)
        state, _ = group["b"].minimize(lambda p: p["b"], state)
    # a stepped at global steps 0 and 2, b at 1 and 3 (TF: global_step= on both minimizes).
    assert float(state.params["a"]) == pytest.approx(-(1.0 + 1 / 3))
    assert float(state.params["b"]) == pytest.approx(-(1 / 2 + 1 / 4))


def test_a_group_state_runs_through_lax_scan() -> None:
    gan = _gan_group()

    def iteration(state, z):
        state, dl = gan["D"].minimize(d_loss, state, REAL, z)
        state, gl = gan["G"].minimize(g_loss, state, z)
        return state, jnp.stack([dl, gl])

    with standard_promotion:
        scanned, losses = jax.jit(lambda s: jax.lax.scan(iteration, s, NOISE))(gan.init(GAN_PARAMS))
        state = gan.init(GAN_PARAMS)
        for z in NOISE:
            state, _ = iteration(state, z)
    chex.assert_trees_all_close(scanned, state, rtol=1e-5, atol=1e-6)
    assert losses.shape == (len(NOISE), 2)


def test_a_call_may_narrow_its_var_list_but_not_widen_it() -> None:
    group = fg.train.OptimizerGroup(d=(fg.train.GradientDescentOptimizer(0.5), ["x", "y"]))
    state = group.init({"x": jnp.float32(1.0), "y": jnp.float32(1.0), "z": jnp.float32(1.0)})
    loss = lambda p: p["x"] + p["y"] + p["z"]  # noqa: E731
    narrowed, _ = group["d"].minimize(loss, state, var_list=["y"])
    assert [float(v) for v in narrowed.params.values()] == [1.0, 0.5, 1.0]
    with pytest.raises(
        ValueError,
        match=r"OptimizerGroup\['d'\]\.minimize.*var_list selects \['z'\], which this optimizer "
        "holds no slots for",
    ):
        group["d"].minimize(loss, state, var_list=["y", "z"])
    gvs = fg.train.GradientDescentOptimizer(0.1).compute_gradients(loss, state.params)
    with pytest.raises(
        ValueError, match=r"apply_gradients.*gradients for \['z'\], which this optimizer holds"
    ):
        group["d"].apply_gradients(gvs, state)


def test_microbatches_with_a_group_optimizer_train_its_variables_only() -> None:
    group = fg.train.OptimizerGroup(
        w=(fg.train.GradientDescentOptimizer(0.1), ["w"]),
        c=(fg.train.GradientDescentOptimizer(0.1), ["c"]),
    )
    x = jnp.arange(8.0)
    loss = lambda p, x: jnp.mean((p["w"] * x + p["c"] - 1.0) ** 2)  # noqa: E731
    state = group.init({"w": jnp.float32(0.5), "c": jnp.float32(0.0)})
    micro, micro_loss = fg.train.minimize_in_microbatches(
        group["w"], loss, state, x, num_microbatches=4
    )
    whole, whole_loss = group["w"].minimize(loss, state, x)
    chex.assert_trees_all_close(micro.params, whole.params, rtol=1e-6)
    np.testing.assert_allclose(micro_loss, whole_loss, rtol=1e-6)
    assert float(micro.params["c"]) == 0.0


def test_group_optimizers_may_accumulate_or_skip_nonfinite_steps() -> None:
    sgd = fg.train.GradientDescentOptimizer(0.5)
    group = fg.train.OptimizerGroup(
        a=(fg.train.Optimizer(fg.train.accumulate_gradients(sgd.tx, 2)), ["a"]),
        b=(fg.train.Optimizer(fg.train.skip_nonfinite(sgd.tx)), ["b"]),
    )
    state = group.init({"a": jnp.float32(1.0), "b": jnp.float32(1.0)})
    for scale in (1.0, 3.0):  # a: one update, on the mean gradient 2.0
        state, _ = group["a"].minimize(lambda p, s: s * p["a"], state, jnp.float32(scale))
    state, _ = group["b"].minimize(lambda p: jnp.float32(jnp.inf) * p["b"], state)
    assert float(state.params["a"]) == 0.0 and float(state.params["b"]) == 1.0
    assert int(fg.train.skipped_steps(state.opt_state["b"]).total) == 1
    assert int(state.global_step) == 3


def test_set_learning_rate_sets_every_rate_of_a_group() -> None:
    group = fg.train.OptimizerGroup(
        a=(fg.train.GradientDescentOptimizer(0.1), ["a"]),
        b=(fg.train.AdamOptimizer(0.1), ["b"]),
    )
    state = fg.train.set_learning_rate(group.init({"a": jnp.ones(1), "b": jnp.ones(1)}), 0.5)
    rates = [s.learning_rate for s in state.opt_state.values()]
    np.testing.assert_array_equal(rates, [0.5, 0.5])


def test_set_learning_rate_refuses_a_group_with_a_scheduled_optimizer() -> None:
    group = fg.train.OptimizerGroup(
        a=(fg.train.GradientDescentOptimizer(0.1), ["a"]),
        b=(fg.train.AdamOptimizer(fg.train.exponential_decay(0.1, 10, 0.5)), ["b"]),
    )
    state = group.init({"a": jnp.ones(1), "b": jnp.ones(1)})
    with pytest.raises(
        ValueError,
        match=r"state\.opt_state\['b'\].* holds a learning-rate schedule.*build that "
        "optimizer with a float learning_rate",
    ):
        fg.train.set_learning_rate(state, 0.5)


def test_each_optimizer_is_an_optimizer_whose_init_makes_the_group_state() -> None:
    group = _gan_group()
    assert sorted(group) == ["D", "G"] and len(group) == 2
    assert isinstance(group["D"], fg.train.Optimizer)
    with standard_promotion:
        chex.assert_trees_all_equal(group["G"].init(GAN_PARAMS), group.init(GAN_PARAMS))


# --- bad input ------------------------------------------------------------------------


def test_group_needs_optimizers() -> None:
    with pytest.raises(ValueError, match=r"OptimizerGroup\(\*\*optimizers\): no optimizer given"):
        fg.train.OptimizerGroup()


def test_group_entries_must_be_optimizers_all_reported_at_once() -> None:
    with pytest.raises(
        TypeError,
        match=r"a= is GradientTransformationExtraArgs; b= is tuple; pass an fg\.train "
        r"optimizer or a pair \(optimizer, var_list\).*fg\.train\.Optimizer\(tx\)",
    ):
        fg.train.OptimizerGroup(a=optax.adam(0.1), b=(optax.sgd(0.1), ["x"]))


def test_unknown_member_says_did_you_mean() -> None:
    group = _gan_group()
    with pytest.raises(KeyError, match=r"no optimizer named 'd' \(did you mean 'D'\?\)"):
        group["d"]


def test_a_bad_var_list_names_the_optimizer() -> None:
    group = fg.train.OptimizerGroup(D=(fg.train.GradientDescentOptimizer(0.1), ["D/W"]))
    with pytest.raises(
        ValueError, match=r"OptimizerGroup\['D'\]\.init\(params\): var_list names 'D/W'"
    ):
        group.init({"D": {"w": jnp.zeros(2)}})


def test_states_of_groups_and_plain_optimizers_do_not_mix() -> None:
    group = fg.train.OptimizerGroup(a=fg.train.GradientDescentOptimizer(0.1))
    plain = fg.train.GradientDescentOptimizer(0.1)
    params = {"w": jnp.ones(2)}
    with pytest.raises(
        ValueError,
        match=r"opt_state holds a dict of slots keyed \['a'\] — the state of an "
        r"fg\.train\.OptimizerGroup; step it with the group's optimizers, e.g. "
        r"group\['a'\]\.minimize",
    ):
        plain.minimize(lambda p: jnp.sum(p["w"]), group.init(params))
    with pytest.raises(
        ValueError,
        match=r"holds no slots for 'a'.*make the shared state with state = group\.init",
    ):
        group["a"].minimize(lambda p: jnp.sum(p["w"]), plain.init(params))


def test_a_group_state_round_trips_through_a_checkpoint(tmp_path) -> None:
    pytest.importorskip("orbax.checkpoint")
    gan = _gan_group()
    with standard_promotion:
        state, _ = gan["D"].minimize(d_loss, gan.init(GAN_PARAMS), REAL, NOISE[0])
        with fg.train.Checkpointer(tmp_path) as checkpoints:
            checkpoints.save(state)
            restored = checkpoints.restore(gan.init(GAN_PARAMS))
        chex.assert_trees_all_equal(restored, state)
        chex.assert_trees_all_equal(
            gan["G"].minimize(g_loss, restored, NOISE[0]),
            gan["G"].minimize(g_loss, state, NOISE[0]),
        )


# --- one train op of every member (tf.estimator's wide & deep) ---------------------------

WIDE_PARAMS = {
    "dnn": {"E": jnp.asarray(np.linspace(-1, 1, 12).reshape(6, 2), jnp.float32)},
    "linear": {"w": jnp.asarray([0.5, -0.25], jnp.float32)},
    "other": jnp.float32(1.0),
}
WIDE_IDS = jnp.array([1, 4, 4], jnp.int32)


def _wide_loss(p, ids):
    deep = jnp.sum(jnp.tanh(p["dnn"]["E"][ids]), axis=1)
    return jnp.sum((deep + p["linear"]["w"][0] - p["linear"]["w"][1]) ** 2)


def _wide_group():
    return fg.train.OptimizerGroup(
        dnn=(fg.train.AdagradOptimizer(0.1), {"dnn": True, "linear": False, "other": False}),
        linear=(
            fg.train.MomentumOptimizer(fg.train.exponential_decay(0.1, 1, 0.5), 0.9),
            {"dnn": False, "linear": True, "other": False},
        ),
    )


def _reference(steps):
    """Each member's own optimizer on the gradients of one jax.grad at the same values,
    the linear member's schedule at the step before the update."""
    dnn_opt, lin_opt = fg.train.AdagradOptimizer(0.1), fg.train.MomentumOptimizer(0.1, 0.9)
    dnn = dnn_opt.init(WIDE_PARAMS["dnn"])
    lin = lin_opt.init(WIDE_PARAMS["linear"])
    for step in range(steps):
        g = jax.grad(_wide_loss)({**WIDE_PARAMS, "dnn": dnn.params, "linear": lin.params}, WIDE_IDS)
        dnn = dnn_opt.apply_gradients([(g["dnn"]["E"], None)], dnn)
        lin = fg.train.set_learning_rate(lin, 0.1 * 0.5**step)
        lin = lin_opt.apply_gradients([(g["linear"]["w"], None)], lin)
    return dnn.params, lin.params


@pytest.mark.parametrize("form", ["minimize", "compute_apply"])
def test_one_train_op_steps_every_member_from_one_gradient(form, variant):
    group = _wide_group()

    def step(state):
        if form == "minimize":
            return group.minimize(_wide_loss, state, WIDE_IDS)[0]
        gvs = group.compute_gradients(_wide_loss, state.params, WIDE_IDS)
        assert isinstance(gvs[0][0], fg.IndexedSlices)  # the table's, to the sparse rule
        return group.apply_gradients(gvs, state)

    state = group.init(WIDE_PARAMS)
    for _ in range(3):
        state = variant(step)(state)
    dnn, linear = _reference(3)
    assert int(state.global_step) == 3  # once per step, not once per member
    chex.assert_trees_all_close(state.params["dnn"], dnn, rtol=1e-5)
    chex.assert_trees_all_close(state.params["linear"], linear, rtol=1e-5)
    assert float(state.params["other"]) == 1.0


def test_one_train_op_refuses_a_gradient_no_member_trains():
    group = _wide_group()
    state = group.init(WIDE_PARAMS)
    gvs = fg.train.GradientDescentOptimizer(0.1).compute_gradients(
        lambda p: _wide_loss(p, WIDE_IDS) * p["other"], state.params
    )
    with pytest.raises(
        ValueError,
        match=r"a gradient for 'other', which no optimizer of the group trains; drop those pairs",
    ):
        group.apply_gradients(gvs, state)


def test_one_train_op_refuses_a_member_without_gradients():
    group = _wide_group()
    state = group.init(WIDE_PARAMS)
    with pytest.raises(
        ValueError, match=r"OptimizerGroup.minimize.*\['linear'\].*'No gradients provided'"
    ):
        group.minimize(lambda p: jnp.sum(p["dnn"]["E"]), state)


def test_a_group_step_whose_var_list_leaves_a_member_nothing_says_so() -> None:
    group = fg.train.OptimizerGroup(
        d=(fg.train.AdamOptimizer(0.1), ["d"]), g=(fg.train.GradientDescentOptimizer(0.1), ["g"])
    )
    state = group.init({"d": jnp.float32(1.0), "g": jnp.float32(2.0)})
    with pytest.raises(ValueError, match=r"no gradient reaches a variable of \['g'\] \(var_list "
                       r"leaves it none.*group\['d'\]\.minimize\(loss_fn, state\)"):  # fmt: skip
        group.minimize(lambda p: p["d"] * p["g"], state, var_list=["d"])


def test_a_members_exclusions_are_matched_against_every_variable() -> None:
    """BERT's exclusion list names the model's LayerNorm, which another member trains: the
    same optimizer alone (minimize(var_list=...)) trains, so the member does too."""
    params = {"dense": {"kernel": jnp.ones(2)}, "LayerNorm": {"gamma": jnp.ones(2)}}
    bert = fg.train.AdamWeightDecayOptimizer(
        0.1, weight_decay_rate=0.01, exclude_from_weight_decay=["LayerNorm"]
    )
    group = fg.train.OptimizerGroup(
        bert=(bert, ["dense/kernel"]),
        ln=(fg.train.GradientDescentOptimizer(0.1), ["LayerNorm/gamma"]),
    )

    def loss(p):
        return jnp.sum(p["dense"]["kernel"] * p["LayerNorm"]["gamma"])

    state, _ = group.minimize(loss, group.init(params))
    alone, _ = bert.minimize(loss, bert.init(params), var_list=["dense/kernel"])
    chex.assert_trees_all_close(state.params["dense"], alone.params["dense"])
