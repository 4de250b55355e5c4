"""restore_tf_checkpoint / save_tf_checkpoint without TensorFlow: round trips, names, bad input.

TensorFlow's own checkpoints and continuations are in
tests/parity/test_tf_checkpoint_parity.py.
"""

import os
from pathlib import Path

import chex
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import funcgrad as fg
from funcgrad.train.checkpoints import _tf_bundle
from funcgrad.train.checkpoints import _tf_job
from tests.train.optimizers.test_common import OPTIMIZERS

_rng = np.random.default_rng(0)
PARAMS = {
    "W": jnp.asarray(_rng.normal(size=(3, 2)), jnp.float32),
    "layer1": {"bias": jnp.asarray(_rng.normal(size=(2,)), jnp.float32)},
}
X = jnp.asarray(_rng.normal(size=(4, 3)), jnp.float32)


def _loss(params, x):
    return jnp.mean(jnp.tanh(x @ params["W"] + params["layer1"]["bias"][None, :]) ** 2)


_STEPS: dict = {}


def _train(opt, state, steps):
    """``steps`` steps of ``opt`` (one compiled step per optimizer)."""
    if opt not in _STEPS:
        _STEPS[opt] = jax.jit(lambda s: opt.minimize(_loss, s, X)[0])
    for _ in range(steps):
        state = _STEPS[opt](state)
    return state


def _zeros(opt):
    return opt.init(jax.tree.map(jnp.zeros_like, PARAMS))


def _copy(tree):
    return jax.tree.map(np.array, tree)


@pytest.fixture
def momentum_ckpt(tmp_path):
    """A Momentum state after 2 steps, saved: (optimizer, state, prefix)."""
    opt = fg.train.MomentumOptimizer(0.1, 0.9)
    state = _train(opt, opt.init(PARAMS), 2)
    return opt, state, fg.train.save_tf_checkpoint(str(tmp_path / "model.ckpt-2"), state, opt)


@pytest.mark.parametrize("make", OPTIMIZERS)
def test_round_trip_then_training_goes_on_the_same(tmp_path, make) -> None:
    opt = make()
    state = _train(opt, opt.init(PARAMS), 3)
    prefix = fg.train.save_tf_checkpoint(str(tmp_path / "model.ckpt-3"), state, opt)
    restored = fg.train.restore_tf_checkpoint(prefix, _zeros(opt), opt)
    chex.assert_trees_all_equal(restored, state)
    chex.assert_trees_all_equal(_train(opt, restored, 2), _train(opt, state, 2))


def test_names_are_tensorflows(tmp_path) -> None:
    opt = fg.train.RMSPropOptimizer(0.1, momentum=0.5, centered=True)
    state = _train(opt, opt.init(PARAMS), 1)
    prefix = fg.train.save_tf_checkpoint(str(tmp_path / "m"), state, opt)
    reader = _tf_bundle.BundleReader(prefix)
    assert sorted(reader.entries) == [
        "W", "W/RMSProp", "W/RMSProp_1", "W/RMSProp_2", "global_step", "layer1/bias",
        "layer1/bias/RMSProp", "layer1/bias/RMSProp_1", "layer1/bias/RMSProp_2",
    ]  # fmt: skip
    inner = state.opt_state.inner_state
    np.testing.assert_array_equal(reader.read("W/RMSProp"), inner[0].nu["W"])
    np.testing.assert_array_equal(reader.read("W/RMSProp_1"), inner[0].mu["W"])  # mean gradient
    np.testing.assert_array_equal(reader.read("W/RMSProp_2"), -inner[2].trace["W"])  # sign
    assert reader.read("global_step").dtype == np.int64


@pytest.mark.parametrize("t", [0, 1, 7, 900, 20_000, 200_000])
def test_adam_step_count_from_the_beta_powers(tmp_path, t: int) -> None:
    """The state's beta1_power = beta1 ** (t + 1), TensorFlow's float32 products, is
    written as it is; t comes back from the powers even when global_step says otherwise."""
    opt = fg.train.AdamOptimizer(0.1, beta1=0.9, beta2=0.999)
    state = _train(opt, opt.init(PARAMS), 1)
    inner = state.opt_state.inner_state
    powers = [np.float32(1), np.float32(1)]
    for _ in range(t + 1):
        powers = [np.float32(p * np.float32(b)) for p, b in zip(powers, (0.9, 0.999), strict=True)]
    adam = inner[0]._replace(step=jnp.int32(t), beta1_power=powers[0], beta2_power=powers[1])
    state = state._replace(
        opt_state=state.opt_state._replace(inner_state=(adam, inner[1])),
        global_step=jnp.int32(t + 5),
    )
    prefix = fg.train.save_tf_checkpoint(str(tmp_path / "m"), state, opt)
    reader = _tf_bundle.BundleReader(prefix)
    assert [reader.read("beta1_power"), reader.read("beta2_power")] == powers
    restored = fg.train.restore_tf_checkpoint(prefix, _zeros(opt), opt)
    got = int(restored.opt_state.inner_state[0].step)
    back = restored.opt_state.inner_state[0]
    assert [back.beta1_power, back.beta2_power] == powers
    if t < 20_000:
        assert got == t
    else:  # beta1_power is 0: every count past its underflow gives the same numbers
        assert got >= 900 and abs(got - t) <= 1 + t // 1000
        chex.assert_trees_all_equal(_train(opt, restored, 1).params, _train(opt, state, 1).params)


def test_adam_powers_of_other_betas(tmp_path) -> None:
    opt = fg.train.AdamOptimizer(0.1, beta1=0.9, beta2=0.999)
    prefix = fg.train.save_tf_checkpoint(str(tmp_path / "m"), _train(opt, opt.init(PARAMS), 3), opt)
    other = fg.train.AdamOptimizer(0.1, beta1=0.8)
    with pytest.raises(ValueError, match=r"not powers of this optimizer's beta1=0.8.*beta2 of the"):
        fg.train.restore_tf_checkpoint(prefix, _zeros(other), other)


def test_a_schedule_follows_global_step(tmp_path) -> None:
    opt = fg.train.AdamOptimizer(fg.train.exponential_decay(0.1, 2, 0.5))
    state = _train(opt, opt.init(PARAMS), 3)
    prefix = fg.train.save_tf_checkpoint(str(tmp_path / "m"), state, opt)
    restored = fg.train.restore_tf_checkpoint(prefix, _zeros(opt), opt)
    assert int(restored.opt_state.step) == 3
    chex.assert_trees_all_equal(restored, state)


def test_directory_and_index_paths(momentum_ckpt, tmp_path) -> None:
    opt, state, prefix = momentum_ckpt
    for path in (tmp_path, prefix + ".index", prefix + ".data-00000-of-00001"):
        chex.assert_trees_all_equal(fg.train.restore_tf_checkpoint(path, _zeros(opt), opt), state)


def test_name_map_renames_variables_and_slots(tmp_path) -> None:
    opt = fg.train.AdamOptimizer(0.1)
    state = _train(opt, opt.init(PARAMS), 2)
    name_map = {
        "W": "model/W",
        "model/W/Adam": "train/model/W/Adam",  # a slot: from its variable's mapped name
        "beta1_power": "train/beta1_power",
        "global_step": "step",
    }
    prefix = fg.train.save_tf_checkpoint(str(tmp_path / "m"), state, opt, name_map=name_map)
    names = set(_tf_bundle.BundleReader(prefix).entries)
    assert {"model/W", "train/model/W/Adam", "model/W/Adam_1", "train/beta1_power"} <= names
    assert {"step", "beta2_power", "layer1/bias/Adam"} <= names and "W" not in names
    restored = fg.train.restore_tf_checkpoint(prefix, _zeros(opt), opt, name_map=name_map)
    chex.assert_trees_all_equal(restored, state)


def test_name_map_none_keeps_the_states_value(momentum_ckpt, tmp_path) -> None:
    """A new head absent from the checkpoint, and a run that saved no global_step."""
    opt, state, prefix = momentum_ckpt
    params = {**PARAMS, "head": jnp.ones(3)}
    template = opt.init(params)._replace(global_step=jnp.int32(7))
    name_map = {"head": None, "global_step": None}
    restored = fg.train.restore_tf_checkpoint(prefix, template, opt, name_map=name_map)
    np.testing.assert_array_equal(restored.params["head"], np.ones(3))
    np.testing.assert_array_equal(restored.params["W"], state.params["W"])
    assert int(restored.global_step) == 7
    np.testing.assert_array_equal(restored.opt_state.inner_state[0].trace["head"], np.zeros(3))


def test_var_list_the_variables_tensorflow_trained(tmp_path) -> None:
    """TensorFlow gives slots only to the variables it trains (minimize(var_list=...))."""
    opt = fg.train.MomentumOptimizer(0.1, 0.9)
    state = opt.init(PARAMS)
    for _ in range(2):
        state, _ = opt.minimize(_loss, state, X, var_list=["W"])
    prefix = fg.train.save_tf_checkpoint(str(tmp_path / "m"), state, opt, var_list=["W"])
    assert "layer1/bias/Momentum" not in _tf_bundle.BundleReader(prefix).entries
    with pytest.raises(ValueError, match=r"lacks 'layer1/bias/Momentum'.*var_list="):
        fg.train.restore_tf_checkpoint(prefix, _zeros(opt), opt)
    restored = fg.train.restore_tf_checkpoint(prefix, _zeros(opt), opt, var_list=["W"])
    chex.assert_trees_all_equal(restored, state)


def test_restored_arrays_are_where_the_templates_are(momentum_ckpt) -> None:
    opt, state, prefix = momentum_ckpt
    mesh = jax.sharding.Mesh(np.array(jax.devices()[:2]), ("x",))
    sharded = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec("x"))
    template = _zeros(opt)
    template = template._replace(
        params={**template.params, "layer1": {"bias": jax.device_put(jnp.zeros(2), sharded)}}
    )
    restored = fg.train.restore_tf_checkpoint(prefix, template, opt)
    assert restored.params["layer1"]["bias"].sharding == sharded
    np.testing.assert_array_equal(restored.params["layer1"]["bias"], state.params["layer1"]["bias"])


# Bad input: a clear error, the next step in it, and the state passed in unchanged.


def _restore_fails(error, match, prefix, template, opt, **kwargs) -> None:
    before = _copy(template)
    with pytest.raises(error, match=match):
        fg.train.restore_tf_checkpoint(prefix, template, opt, **kwargs)
    chex.assert_trees_all_equal(_copy(template), before)


def test_not_a_checkpoint(momentum_ckpt) -> None:
    opt, _, prefix = momentum_ckpt
    Path(prefix + ".index").write_bytes(b"model_checkpoint_path: 'x'\n" * 4)
    _restore_fails(
        ValueError, "not the index of a TensorFlow V2 checkpoint", prefix, _zeros(opt), opt
    )


def test_one_file_is_not_a_v2_checkpoint(tmp_path) -> None:
    opt = fg.train.GradientDescentOptimizer(0.1)
    (tmp_path / "model.ckpt").write_bytes(b"\x00" * 64)
    _restore_fails(
        ValueError, "re-save it in TensorFlow", str(tmp_path / "model.ckpt"), _zeros(opt), opt
    )


def test_truncated_index(momentum_ckpt) -> None:
    opt, _, prefix = momentum_ckpt
    data = Path(prefix + ".index").read_bytes()
    Path(prefix + ".index").write_bytes(data[: len(data) // 2])
    _restore_fails(ValueError, "not the index|truncated", prefix, _zeros(opt), opt)


def test_truncated_data(momentum_ckpt) -> None:
    opt, _, prefix = momentum_ckpt
    path = prefix + ".data-00000-of-00001"
    Path(path).write_bytes(Path(path).read_bytes()[:30])
    _restore_fails(ValueError, "truncated — use an intact copy", prefix, _zeros(opt), opt)


def test_damaged_data(momentum_ckpt) -> None:
    opt, _, prefix = momentum_ckpt
    path = prefix + ".data-00000-of-00001"
    data = bytearray(Path(path).read_bytes())
    data[10] ^= 0x04
    Path(path).write_bytes(data)
    _restore_fails(ValueError, "fails its CRC32C check", prefix, _zeros(opt), opt)


def test_wrong_dtype_and_shape_reported_together(momentum_ckpt) -> None:
    opt, _, prefix = momentum_ckpt
    params = {"W": jnp.zeros((3, 2), jnp.bfloat16), "layer1": {"bias": jnp.zeros(3)}}
    _restore_fails(
        ValueError,
        r"'W' is float32\[3, 2\] in the checkpoint, bfloat16\[3, 2\] in the state.*"
        r"'layer1/bias' is float32\[2\] in the checkpoint, float32\[3\].*build the params",
        prefix,
        opt.init(params),
        opt,
    )


def test_missing_slots_all_listed(tmp_path) -> None:
    sgd = fg.train.GradientDescentOptimizer(0.1)
    prefix = fg.train.save_tf_checkpoint(str(tmp_path / "m"), sgd.init(PARAMS), sgd)
    opt = fg.train.AdamOptimizer(0.1)
    _restore_fails(
        ValueError,
        r"lacks 'W/Adam', 'W/Adam_1', 'layer1/bias/Adam', 'layer1/bias/Adam_1', "
        r"'beta1_power', 'beta2_power' \(it holds 3 names.*name_map",
        prefix,
        _zeros(opt),
        opt,
    )


def test_missing_name_suggests_a_scoped_one(tmp_path) -> None:
    opt = fg.train.MomentumOptimizer(0.1, 0.9)
    saved = fg.train.save_tf_checkpoint(
        str(tmp_path / "m"), opt.init(PARAMS), opt, name_map={"W/Momentum": "train/W/Momentum"}
    )
    _restore_fails(
        ValueError, r"'W/Momentum' \(did you mean 'train/W/Momentum'\?\)", saved, _zeros(opt), opt
    )


def test_global_step_beyond_int32(tmp_path) -> None:
    opt = fg.train.GradientDescentOptimizer(0.1)
    prefix = str(tmp_path / "m")
    tensors = {"W": PARAMS["W"], "layer1/bias": PARAMS["layer1"]["bias"]}
    _tf_job.write_bundle(prefix, {**tensors, "global_step": np.int64(2**40)})
    _restore_fails(ValueError, "outside int32.*name_map=", prefix, _zeros(opt), opt)


def test_no_checkpoint_there(tmp_path) -> None:
    opt = fg.train.GradientDescentOptimizer(0.1)
    _restore_fails(
        FileNotFoundError,
        r"does not exist\); pass the prefix",
        str(tmp_path / "x"),
        _zeros(opt),
        opt,
    )
    _restore_fails(FileNotFoundError, "has no 'checkpoint' file", tmp_path, _zeros(opt), opt)


@pytest.mark.parametrize(
    "tx",
    [
        pytest.param(optax.sgd(0.1), id="optax"),
        pytest.param(
            fg.train.accumulate_gradients(fg.train.AdamOptimizer(0.1).tx, 2), id="wrapped"
        ),
    ],
)
def test_optimizers_without_tensorflow_names(tx, tmp_path) -> None:
    opt = fg.train.Optimizer(tx)
    match = r"the optimizer, a Optimizer, has no TensorFlow 1.x names for its state; the supported"
    _restore_fails(TypeError, match, str(tmp_path / "m"), opt.init(PARAMS), opt)
    with pytest.raises(TypeError, match=match):
        fg.train.save_tf_checkpoint(str(tmp_path / "m"), opt.init(PARAMS), opt)
    assert not os.listdir(tmp_path)


def test_state_of_another_optimizer(momentum_ckpt) -> None:
    opt, _, prefix = momentum_ckpt
    adam = fg.train.AdamOptimizer(0.1)
    _restore_fails(ValueError, "is not the state of this AdamOptimizer", prefix, _zeros(opt), adam)
    with pytest.raises(TypeError, match="state is a dict, not a TrainState"):
        fg.train.restore_tf_checkpoint(prefix, PARAMS, opt)


def test_name_map_errors(momentum_ckpt) -> None:
    opt, _, prefix = momentum_ckpt
    _restore_fails(
        ValueError, r"'w' \(did you mean 'W'\?\)", prefix, _zeros(opt), opt, name_map={"w": "W"}
    )
    _restore_fails(
        TypeError, "name_map must map names", prefix, _zeros(opt), opt, name_map={"W": 3}
    )
    bare = opt.init(jnp.zeros(2))
    _restore_fails(ValueError, r"name it with name_map=\{'': 'W'\}", prefix, bare, opt)


def test_save_errors(momentum_ckpt, tmp_path) -> None:
    opt, state, _ = momentum_ckpt
    with pytest.raises(
        ValueError, match=r"is a directory; pass a prefix in it, e.g. .*model.ckpt-2"
    ):
        fg.train.save_tf_checkpoint(tmp_path, state, opt)
    with pytest.raises(
        ValueError,
        match=r"'W' and 'layer1/bias' share the TensorFlow name 'W'.*nothing was read or written",
    ):
        fg.train.save_tf_checkpoint(str(tmp_path / "x"), state, opt, name_map={"layer1/bias": "W"})
    assert not (tmp_path / "x.index").exists()
    sgd = fg.train.GradientDescentOptimizer(0.1)
    fp8 = sgd.init({"W": jnp.zeros(2, jnp.float8_e4m3fn)})
    with pytest.raises(TypeError, match="'W' is float8_e4m3fn, which a TensorFlow checkpoint"):
        fg.train.save_tf_checkpoint(str(tmp_path / "x"), fp8, sgd)
    assert not (tmp_path / "x.index").exists()


# Compositions: a group, a loss scale, moving averages, global_step's dtype, extras.


def _names(prefix):
    return sorted(_tf_bundle.BundleReader(prefix).entries)


def test_group_slots_numbered_as_tensorflow_numbers_them(tmp_path) -> None:
    group = fg.train.OptimizerGroup(
        a=fg.train.AdamOptimizer(0.1), b=(fg.train.AdamOptimizer(0.2), ["W"])
    )
    state = group["a"].minimize(_loss, group.init(PARAMS), X)[0]
    state = group["b"].minimize(_loss, state, X)[0]
    prefix = fg.train.save_tf_checkpoint(str(tmp_path / "m"), state, group)
    assert _names(prefix) == [
        "W", "W/Adam", "W/Adam_1", "W/Adam_2", "W/Adam_3", "beta1_power", "beta1_power_1",
        "beta2_power", "beta2_power_1", "global_step", "layer1/bias", "layer1/bias/Adam",
        "layer1/bias/Adam_1",
    ]  # fmt: skip
    restored = fg.train.restore_tf_checkpoint(prefix, group.init(PARAMS), group)
    chex.assert_trees_all_equal(restored, state)
    assert int(restored.opt_state["b"].inner_state[0].step) == 1  # its own count


def test_loss_scale_and_int32_global_step(tmp_path) -> None:
    opt = fg.train.LossScaleOptimizer(fg.train.MomentumOptimizer(0.1, 0.9), initial_scale=8.0)
    state = _train(opt, opt.init(PARAMS), 2)
    prefix = fg.train.save_tf_checkpoint(
        str(tmp_path / "m"), state, opt, global_step_dtype=np.int32
    )
    reader = _tf_bundle.BundleReader(prefix)
    assert reader.read("global_step").dtype == np.int32
    assert reader.read("good_steps").dtype == np.int64
    assert float(reader.read("current_loss_scale")) == 8.0
    restored = fg.train.restore_tf_checkpoint(prefix, opt.init(PARAMS), opt)
    chex.assert_trees_all_equal(restored, state)
    fixed = fg.train.LossScaleOptimizer(fg.train.MomentumOptimizer(0.1, 0.9), dynamic=False)
    prefix = fg.train.save_tf_checkpoint(str(tmp_path / "f"), fixed.init(PARAMS), fixed)
    assert "current_loss_scale" not in _names(prefix)  # TensorFlow's fixed scale: no variable


@pytest.mark.parametrize(
    ("opt", "slot"),
    [
        (fg.train.MomentumOptimizer(0.1, 0.9), "W/Momentum"),
        (fg.train.RMSPropOptimizer(0.1, centered=True), "W/RMSProp_1"),
    ],
    ids=["momentum", "rmsprop_centered"],
)
def test_params_with_none_and_integer_leaves_round_trip(opt, slot, tmp_path) -> None:
    """An equinox Linear without bias holds None: the slots still line up with the
    variables; an integer leaf is no variable and keeps the template's value."""
    params = {"a": None, "W": PARAMS["W"], "layer1": {"bias": PARAMS["layer1"]["bias"], "b": None}}
    params["count"] = jnp.int32(5)
    state = _train(opt, opt.init(params), 2)
    prefix = fg.train.save_tf_checkpoint(str(tmp_path / "m"), state, opt)
    assert {"W", "layer1/bias", slot} <= set(_names(prefix))
    template = opt.init({**params, "count": jnp.int32(0)})
    restored = fg.train.restore_tf_checkpoint(prefix, template, opt)
    chex.assert_trees_all_equal(restored.opt_state, state.opt_state)
    chex.assert_trees_all_equal(restored.params["W"], state.params["W"])
    assert int(restored.params["count"]) == 0


@pytest.mark.parametrize("kept", ["current_loss_scale", "good_steps"])
def test_name_map_keeps_one_of_the_loss_scale_variables(tmp_path, kept) -> None:
    opt = fg.train.LossScaleOptimizer(fg.train.MomentumOptimizer(0.1, 0.9), initial_scale=8.0)
    state = opt.init(PARAMS)
    state = state._replace(opt_state=state.opt_state._replace(good_steps=jnp.int32(3)))
    prefix = fg.train.save_tf_checkpoint(str(tmp_path / "m"), state, opt)
    template = opt.init(PARAMS)
    template = template._replace(
        opt_state=template.opt_state._replace(loss_scale=jnp.float32(2.0), good_steps=jnp.int32(1))
    )
    restored = fg.train.restore_tf_checkpoint(prefix, template, opt, name_map={kept: None})
    got = restored.opt_state
    assert float(got.loss_scale) == (2.0 if kept == "current_loss_scale" else 8.0)
    assert int(got.good_steps) == (1 if kept == "good_steps" else 3)


def test_name_map_keeping_one_beta_power_is_refused(tmp_path) -> None:
    opt = fg.train.AdamOptimizer(0.1)
    prefix = fg.train.save_tf_checkpoint(str(tmp_path / "m"), _train(opt, opt.init(PARAMS), 3), opt)
    for kept in ("beta1_power", "beta2_power"):
        _restore_fails(
            ValueError,
            r"keeps one of \['beta1_power', 'beta2_power'\] \(maps it to None\) and reads",
            prefix,
            opt.init(PARAMS),
            opt,
            name_map={kept: None},
        )


def test_moving_averages_and_extras_round_trip(tmp_path) -> None:
    opt = fg.train.GradientDescentOptimizer(0.1)
    ema = fg.train.ExponentialMovingAverage(0.9)
    state = _train(opt, opt.init(PARAMS), 1)
    ema_state = ema.apply(ema.init(PARAMS), state.params)
    rate = {"learning_rate": jnp.float32(0.05)}
    prefix = fg.train.save_tf_checkpoint(
        str(tmp_path / "m"), state, opt, ema_state=ema_state, extras=rate
    )
    assert "W/ExponentialMovingAverage" in _names(prefix)
    restored = fg.train.restore_tf_checkpoint(
        prefix,
        opt.init(PARAMS),
        opt,
        ema_state=ema.init(PARAMS),
        extras={"learning_rate": jnp.float32(0)},
    )
    chex.assert_trees_all_equal(restored, (state, ema_state, rate))
    alone = fg.train.restore_tf_checkpoint(prefix, opt.init(PARAMS), opt)  # a TrainState
    chex.assert_trees_all_equal(alone, state)


# Every dtype is kept: a NumPy or JAX value as it is, a Python number as tf.Variable(number)
# makes it; a NumPy template reads a NumPy array, so int64 and float64 need no jax_enable_x64.
_EXTRAS = {
    "counter": (np.int64(2**40), np.int64(2**40)),
    "rate": (np.float64(0.1), np.float64(0.1)),
    "table": (np.arange(3, dtype=np.uint8), np.arange(3, dtype=np.uint8)),
    "python_int": (5, np.int32(5)),
    "python_big_int": (2**40, np.int64(2**40)),
    "python_float": (0.1, np.float32(0.1)),
    "python_bool": (True, np.True_),
    "jax": (jnp.bfloat16(0.5), np.asarray(0.5, jnp.bfloat16)),
}


@pytest.mark.parametrize("x64", [False, True], ids=["x64_off", "x64_on"])
def test_extras_keep_their_dtypes(tmp_path, x64) -> None:
    opt = fg.train.GradientDescentOptimizer(0.1)
    with jax.enable_x64(x64):
        extras = {name: given for name, (given, _) in _EXTRAS.items()}
        prefix = fg.train.save_tf_checkpoint(str(tmp_path / "m"), opt.init(PARAMS), opt,
                                             extras=extras)  # fmt: skip
        reader = _tf_bundle.BundleReader(prefix)
        for name, (_, want) in _EXTRAS.items():
            got = reader.read(name)
            assert (got.dtype, got.tolist()) == (want.dtype, want.tolist()), name
        templates = {name: np.zeros_like(want) for name, (_, want) in _EXTRAS.items()}
        _, _, restored = fg.train.restore_tf_checkpoint(
            prefix, opt.init(PARAMS), opt, extras=templates
        )
        for name, (_, want) in _EXTRAS.items():
            assert isinstance(restored[name], np.ndarray), name
            assert (restored[name].dtype, restored[name].tolist()) == (want.dtype, want.tolist())
        report = fg.testing.compare_tf_checkpoint(prefix, opt.init(PARAMS), opt, extras=extras)
        assert report["counter"] == report["rate"] == 0.0


def test_64_bit_values_into_jax_templates(tmp_path) -> None:
    """A JAX template reads a JAX array; one of a 64-bit dtype needs jax_enable_x64, and
    without it the error names it and the NumPy template that needs none."""
    opt = fg.train.GradientDescentOptimizer(0.1)
    extras = {"counter": np.int64(2**40), "rate": np.float64(0.1)}
    prefix = fg.train.save_tf_checkpoint(str(tmp_path / "m"), opt.init(PARAMS), opt, extras=extras)
    with jax.enable_x64(True):
        templates = {"counter": jnp.int64(0), "rate": jnp.float64(0)}
        _, _, restored = fg.train.restore_tf_checkpoint(
            prefix, opt.init(PARAMS), opt, extras=templates
        )
        assert isinstance(restored["counter"], jax.Array)
        assert int(restored["counter"]) == 2**40 and float(restored["rate"]) == 0.1
    _restore_fails(
        ValueError,
        r"'counter' is int64\[\] in the checkpoint, int32\[\] in the state; 'rate' is "
        r"float64\[\] in the checkpoint, float32\[\].*JAX holds no int64 or float64 while "
        r"jax_enable_x64 is off: pass NumPy templates \(np.int64\(0\)\) in extras, or call "
        r"jax.config.update\(\"jax_enable_x64\", True\)",
        prefix, opt.init(PARAMS), opt, extras={"counter": jnp.int32(0), "rate": jnp.float32(0)},
    )  # fmt: skip


def test_two_leaves_with_one_name_are_refused(tmp_path) -> None:
    opt = fg.train.GradientDescentOptimizer(0.1)
    params = {"layer1": {"bias": jnp.zeros(2)}, "layer1/bias": jnp.ones(2)}
    match = (
        r"params\['layer1'\]\['bias'\] and params\['layer1/bias'\] are both named "
        r"'layer1/bias' \(rename a key of params.*nothing was read or written"
    )
    with pytest.raises(ValueError, match=match):
        fg.train.save_tf_checkpoint(str(tmp_path / "m"), opt.init(params), opt)
    prefix = fg.train.save_tf_checkpoint(str(tmp_path / "m"), opt.init(PARAMS), opt)
    _restore_fails(ValueError, match, prefix, opt.init(params), opt)


@pytest.mark.parametrize("name", ["\0W", "W\udc80"], ids=["nul", "surrogate"])
def test_names_a_checkpoint_cannot_hold(name, tmp_path) -> None:
    opt = fg.train.GradientDescentOptimizer(0.1)
    with pytest.raises(ValueError, match=r"start with NUL or are not UTF-8 text.*name_map"):
        fg.train.save_tf_checkpoint(
            str(tmp_path / "m"), opt.init(PARAMS), opt, name_map={"W": name}
        )
    assert not os.listdir(tmp_path)


def test_composition_errors(momentum_ckpt, tmp_path) -> None:
    opt, state, prefix = momentum_ckpt
    group = fg.train.OptimizerGroup(a=opt)
    with pytest.raises(ValueError, match="each have their own var_list; leave var_list out"):
        fg.train.restore_tf_checkpoint(prefix, group.init(PARAMS), group, var_list=["W"])
    debiased = fg.train.ExponentialMovingAverage(0.9, zero_debias=True).init(PARAMS)
    _restore_fails(
        ValueError, "zero_debias=True, which TensorFlow ignores", prefix, state, opt,
        ema_state=debiased,
    )  # fmt: skip
    _restore_fails(TypeError, "ema_state is a dict, not an EmaState", prefix, state, opt,
                   ema_state=PARAMS)  # fmt: skip
    _restore_fails(TypeError, "extras must map TensorFlow names to arrays", prefix, state, opt,
                   extras={"lr": "0.1"})  # fmt: skip
    with pytest.raises(ValueError, match=r"global_step_dtype=<class 'numpy.int16'>; pass np.int64"):
        fg.train.save_tf_checkpoint(str(tmp_path / "x"), state, opt, global_step_dtype=np.int16)
    with pytest.raises(ValueError, match=r"global_step_dtype='float32'; pass np.int64"):
        fg.train.save_tf_checkpoint(str(tmp_path / "x"), state, opt, global_step_dtype="float32")
    prefix = fg.train.save_tf_checkpoint(
        str(tmp_path / "j"), state, opt, global_step_dtype=jnp.int32
    )
    assert _tf_bundle.BundleReader(prefix).read("global_step").dtype == np.int32
    with pytest.raises(ValueError, match=r"'n' is 2361\d+, beyond int64.*pass it as a NumPy"):
        fg.train.save_tf_checkpoint(str(tmp_path / "e"), state, opt, extras={"n": 2**71})
    with pytest.raises(ValueError, match=r"'W' and 'W' share the TensorFlow name 'W'"):
        fg.train.save_tf_checkpoint(str(tmp_path / "e"), state, opt, extras={"W": jnp.zeros(1)})
    outer = fg.train.LossScaleOptimizer(fg.train.Optimizer(optax.sgd(0.1)))
    with pytest.raises(TypeError, match=r"a LossScaleOptimizer, has no TensorFlow 1\.x names"):
        fg.train.save_tf_checkpoint(str(tmp_path / "x"), outer.init(PARAMS), outer)
