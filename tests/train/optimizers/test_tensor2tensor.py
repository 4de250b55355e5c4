"""fg.train.AdafactorOptimizer and MultistepAdamOptimizer (tensor2tensor's): closed forms,
optax's look-alike, variables of every rank, sparse gradients, donation, bad input.

TensorFlow's own numbers are in tests/parity/test_tensor2tensor_parity.py.
"""

from __future__ import annotations

import chex
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import funcgrad as fg
from funcgrad.train.checkpoints import _tf_bundle

_rng = np.random.default_rng(5)
PARAMS = {
    "emb": jnp.asarray(_rng.normal(size=(5, 3)), jnp.float32),
    "kernel": jnp.asarray(_rng.normal(size=(3, 4)), jnp.float32),
    "bias": jnp.asarray(_rng.normal(size=4), jnp.float32),
}
IDS = jnp.array([0, 3, 0])


def _loss(params):
    h = params["emb"][IDS] @ params["kernel"] + params["bias"][None, :]
    return jnp.mean(jnp.tanh(h) ** 2)


def _steps(opt, state, n=3, loss=_loss):
    step = jax.jit(lambda s: opt.minimize(loss, s)[0])
    for _ in range(n):
        state = step(state)
    return state


def _optax_steps(tx, params, n=3, loss=_loss):
    state = tx.init(params)
    for _ in range(n):
        updates, state = tx.update(jax.grad(loss)(params), state, params)
        params = optax.apply_updates(params, updates)
    return params


def _one_step_numpy(w, g, *, factored, lr, decay, eps1=1e-30, eps2=1e-3, clip=1.0):
    """One Adafactor step from fresh slots, in float64 NumPy (the paper's Algorithms 4, 5)."""
    g2 = g * g + eps1
    if factored:
        r = (1 - decay) * g2.mean(-1)
        c = (1 - decay) * g2.mean(-2)
        v = r[..., :, None] * c[..., None, :] / r.mean(-1)[..., None, None]
    else:
        v = (1 - decay) * g2
    x = g / np.sqrt(v)
    x = x / max(1.0, np.sqrt(np.mean(x * x)) / clip)
    return w - lr * max(np.sqrt(np.mean(w * w)), eps2) * x


@pytest.mark.parametrize("shape", [(), (4,), (3, 4), (2, 3, 5)], ids=["0d", "1d", "2d", "3d"])
def test_one_step_of_every_rank_is_the_closed_form(shape) -> None:
    w = np.asarray(_rng.normal(size=shape), np.float32)
    g = np.asarray(_rng.normal(size=shape), np.float32)
    opt = fg.train.AdafactorOptimizer(learning_rate=0.1, decay_rate=0.5)
    state = opt.apply_gradients([(jnp.asarray(g), jnp.asarray(w))], opt.init(jnp.asarray(w)))
    want = _one_step_numpy(w.astype(np.float64), g, factored=len(shape) >= 2, lr=0.1, decay=0.5)
    np.testing.assert_allclose(state.params, want, rtol=2e-6, atol=1e-7)
    slots = state.opt_state.inner_state.slots
    [declared], _ = opt.tf_names(state.params)
    if len(shape) >= 2:  # factored over the last two dimensions, as the original
        assert [k for k, _ in declared] == ["vr", "vc"]
        assert slots["vr"].shape == shape[:-1] and slots["vc"].shape == shape[:-2] + shape[-1:]
    else:  # 0-d and 1-d: the unfactored rule, as the original (no error)
        assert [k for k, _ in declared] == ["v"] and slots["v"].shape == shape


def test_the_default_rates_read_the_global_step() -> None:
    """min(rsqrt(step + 1), 0.01) (times 0.05 without the parameter scale), read at
    global_step; a scalar's clipped step is exactly one step size."""
    w = {"w": jnp.float32(2.0)}
    for scale, want in ((True, 2.0 * 20001**-0.5), (False, 0.05 * 20001**-0.5)):
        opt = fg.train.AdafactorOptimizer(multiply_by_parameter_scale=scale)
        state = opt.init(w)._replace(global_step=jnp.int32(20000))
        state, _ = opt.minimize(lambda p: p["w"], state)
        ulp = 2.4e-7  # of float32 near 2.0
        np.testing.assert_allclose(state.params["w"], 2.0 - want, rtol=0, atol=ulp)
        state = opt.init(w)  # step 0: the 0.01 cap
        state, _ = opt.minimize(lambda p: p["w"], state)
        np.testing.assert_allclose(state.params["w"], 2.0 - want / 20001**-0.5 * 0.01, atol=ulp)


def test_decay_rate_schedules_are_tensor2tensor_formulas() -> None:
    steps = jnp.arange(6)
    adam = jax.vmap(fg.train.adafactor_decay_rate_adam(0.9))(steps)
    t = np.arange(6.0) + 1
    np.testing.assert_allclose(adam, 0.9 * (1 - 0.9 ** (t - 1)) / (1 - 0.9**t), rtol=1e-6)
    pow_ = jax.vmap(fg.train.adafactor_decay_rate_pow(0.8))(steps)
    np.testing.assert_allclose(pow_, 1 - t**-0.8, rtol=1e-6, atol=1e-7)


def test_optax_adafactor_is_the_same_rule_only_with_min_dim_size_to_factor_1() -> None:
    ours = fg.train.AdafactorOptimizer(beta1=0.9)  # the default relative step is 0.01 here
    got = _steps(ours, ours.init(PARAMS)).params
    same = optax.adafactor(0.01, min_dim_size_to_factor=1, momentum=0.9)
    chex.assert_trees_all_close(got, _optax_steps(same, PARAMS), rtol=1e-5, atol=1e-7)
    default = _optax_steps(optax.adafactor(0.01, momentum=0.9), PARAMS)  # factors nothing here
    assert not np.allclose(got["kernel"], default["kernel"], rtol=1e-4)

    # A variable of rank 3 whose first dimension is the largest: optax factors the two
    # largest dimensions, tensor2tensor the last two.
    w = {"w": jnp.asarray(_rng.normal(size=(6, 2, 3)), jnp.float32)}

    def loss3(p):
        return jnp.sum(jnp.sin(p["w"]) * jnp.arange(36.0).reshape(6, 2, 3))

    got3 = _steps(ours, ours.init(w), loss=loss3).params["w"]
    theirs = _optax_steps(same, w, loss=loss3)["w"]
    assert not np.allclose(got3, theirs, rtol=1e-4)


def test_momentum_slot_comes_first_in_tensorflow_names(tmp_path) -> None:
    opt = fg.train.AdafactorOptimizer(beta1=0.9)
    prefix = fg.train.save_tf_checkpoint(str(tmp_path / "m"), _steps(opt, opt.init(PARAMS)), opt)
    reader = _tf_bundle.BundleReader(prefix)
    assert set(reader.entries) == {
        "emb", "emb/Adafactor", "emb/Adafactor_1", "emb/Adafactor_2", "kernel",
        "kernel/Adafactor", "kernel/Adafactor_1", "kernel/Adafactor_2", "bias",
        "bias/Adafactor", "bias/Adafactor_1", "global_step",
    }  # fmt: skip
    assert reader.read("kernel/Adafactor").shape == (3, 4)  # m
    assert reader.read("kernel/Adafactor_1").shape == (3,)  # vr
    assert reader.read("kernel/Adafactor_2").shape == (4,)  # vc


def test_multistep_adam_is_adam_on_the_mean_of_every_n_gradients() -> None:
    multi = fg.train.MultistepAdamOptimizer(0.1, n=3)
    adam = fg.train.AdamOptimizer(0.1)
    state, want = multi.init(PARAMS), adam.init(PARAMS)
    grads = []
    for step in range(6):
        gvs = multi.compute_gradients(_loss, state.params)
        grads.append([g.to_dense() if isinstance(g, fg.IndexedSlices) else g for g, _ in gvs])
        state = multi.apply_gradients(gvs, state)
        if step % 3 == 2:
            mean = [sum(gs) / 3 for gs in zip(*grads, strict=True)]
            want = adam.apply_gradients(
                list(zip(mean, jax.tree.leaves(want.params), strict=True)), want
            )
            grads = []
        chex.assert_trees_all_close(state.params, want.params, rtol=1e-5, atol=1e-7)
    non_slots = state.opt_state.inner_state.non_slots
    assert non_slots["iter"].dtype == jnp.int32 and int(non_slots["iter"]) == 1
    np.testing.assert_allclose(non_slots["beta1_power"], 0.9**3, rtol=1e-6)
    fresh = fg.train.MultistepAdamOptimizer(n=1).init(PARAMS).opt_state.inner_state
    assert int(fresh.non_slots["iter"]) == 0  # n=1 applies at once


@pytest.mark.parametrize(
    "opt",
    [fg.train.AdafactorOptimizer(beta1=0.5), fg.train.MultistepAdamOptimizer(0.1, n=2)],
    ids=["adafactor", "multistep"],
)
def test_a_sparse_gradient_is_made_dense_and_jit_donates(opt) -> None:
    state = opt.init(PARAMS)
    gvs = opt.compute_gradients(_loss, state.params)
    assert any(isinstance(g, fg.IndexedSlices) for g, _ in gvs)
    dense = [(g.to_dense() if isinstance(g, fg.IndexedSlices) else g, v) for g, v in gvs]
    chex.assert_trees_all_close(
        opt.apply_gradients(gvs, state), opt.apply_gradients(dense, state), rtol=1e-6
    )
    step = jax.jit(lambda s: opt.minimize(_loss, s)[0], donate_argnums=0)
    donated = opt.init(jax.tree.map(jnp.copy, PARAMS))
    for _ in range(3):
        donated = step(donated)
    chex.assert_trees_all_close(donated, _steps(opt, opt.init(PARAMS)), rtol=1e-6)


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        pytest.param({"factored": "no"}, TypeError, "factored must be True or False", id="flag"),
        pytest.param(
            {"multiply_by_parameter_scale": 1}, TypeError, "must be True or False", id="flag_int"
        ),
        pytest.param({"beta1": "0.9"}, TypeError, "beta1 must be a number", id="beta1_type"),
        pytest.param(
            {"beta1": 1.0}, ValueError, r"beta1 must be finite and in \[0, 1\)", id="beta1_range"
        ),
        pytest.param(
            {"decay_rate": 1}, ValueError, r"decay_rate must be finite and in \[0, 1\)", id="decay"
        ),
        pytest.param(
            {"decay_rate": lambda step: step}, TypeError, "not one floating scalar", id="decay_fn"
        ),
        pytest.param(
            {"clipping_threshold": 0.0}, ValueError, "clipping_threshold must be finite and > 0",
            id="clip",
        ),
        pytest.param(
            {"clipping_threshold": "1"}, TypeError, "clipping_threshold must be a number",
            id="clip_type",
        ),
        pytest.param({"epsilon1": -1.0}, ValueError, "epsilon1 must be finite and >= 0", id="eps"),
        pytest.param(
            {"simulated_quantize_bits": 8}, ValueError, "not supported; leave both None", id="q"
        ),
        pytest.param(
            {"parameter_encoding": object()}, ValueError, "leave both None", id="encoding"
        ),
        pytest.param(
            {"learning_rate": "0.1"}, TypeError, "learning_rate must be a number", id="rate"
        ),
    ],
)  # fmt: skip
def test_adafactor_bad_hyperparameters(kwargs, error, match) -> None:
    with pytest.raises(error, match=match):
        fg.train.AdafactorOptimizer(**kwargs)


def test_adafactor_accepts_every_documented_value() -> None:
    fg.train.AdafactorOptimizer(clipping_threshold=None, simulated_quantize_bits=0)
    fg.train.AdafactorOptimizer(decay_rate=0.0, epsilon2=0.0)


def test_multistep_and_schedule_bad_hyperparameters() -> None:
    with pytest.raises(TypeError, match=r"n must be an integer, got 2\.0; pass values of"):
        fg.train.MultistepAdamOptimizer(n=2.0)
    with pytest.raises(ValueError, match="n must be finite and >= 1, got 0"):
        fg.train.MultistepAdamOptimizer(n=0)
    with pytest.raises(ValueError, match=r"beta2 must be finite and in \[0, 1\), got 1"):
        fg.train.MultistepAdamOptimizer(beta2=1)
    with pytest.raises(TypeError, match="epsilon must be a number"):
        fg.train.MultistepAdamOptimizer(epsilon=None)
    with pytest.raises(
        ValueError, match=r"adafactor_decay_rate_adam\(beta2\): beta2 must be finite and in"
    ):
        fg.train.adafactor_decay_rate_adam(1.5)
    with pytest.raises(ValueError, match=r"exponent must be finite and in \[0, 1\], got 2"):
        fg.train.adafactor_decay_rate_pow(2)


def test_loss_scaling_a_group_and_orbax_compose(tmp_path) -> None:
    opt = fg.train.AdafactorOptimizer(beta1=0.9)
    alone = _steps(opt, opt.init(PARAMS))
    scaled = fg.train.LossScaleOptimizer(opt, dynamic=True, initial_scale=8.0)
    chex.assert_trees_all_close(_steps(scaled, scaled.init(PARAMS)).params, alone.params, rtol=1e-6)
    multi = fg.train.MultistepAdamOptimizer(0.1, n=2)
    group = fg.train.OptimizerGroup(a=(opt, ["kernel", "bias"]), m=(multi, ["emb"]))
    state = group.init(PARAMS)
    for _ in range(2):
        state = group["m"].minimize(_loss, group["a"].minimize(_loss, state)[0])[0]
    prefix = fg.train.save_tf_checkpoint(str(tmp_path / "g" / "m"), state, group)
    assert {"kernel/Adafactor_2", "emb/Adam_2", "iter"} <= set(
        _tf_bundle.BundleReader(prefix).entries
    )
    restored = fg.train.restore_tf_checkpoint(prefix, group.init(PARAMS), group)
    chex.assert_trees_all_equal(restored.params, state.params)
    checkpointer = fg.train.Checkpointer(tmp_path / "orbax")
    checkpointer.save(alone)
    chex.assert_trees_all_equal(checkpointer.restore(opt.init(PARAMS)), alone)
