"""fg.train.TF1Optimizer (an optimizer written as a tf.train.Optimizer subclass) and the
optimizers of TF1 projects written on it: compositions, checkpoints, bad input.

TensorFlow's own numbers are in tests/parity/test_tf1_projects_parity.py.
"""

from __future__ import annotations

from typing import ClassVar

import chex
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import funcgrad as fg
from funcgrad.train.checkpoints import _tf_bundle


class LazyAdam(fg.train.TF1Optimizer):
    """tf.contrib.opt.LazyAdamOptimizer (AdamOptimizer's dense rule, row-only sparse
    rule), written the TF1 way: the proof that the base holds a built-in optimizer."""

    slots: ClassVar[dict[str, str]] = {"m": "Adam", "v": "Adam"}

    def __init__(self, learning_rate=0.001, beta1=0.9, beta2=0.999, epsilon=1e-8):
        super().__init__(learning_rate)
        self._beta1, self._beta2, self._epsilon = beta1, beta2, epsilon

    def _non_slots(self):
        return {"beta1_power": self._beta1, "beta2_power": self._beta2}

    def _apply_dense(self, grad, var, slots, step):
        beta1_power, beta2_power = step.non_slots["beta1_power"], step.non_slots["beta2_power"]
        lr = step.learning_rate * jnp.sqrt(1 - beta2_power) / (1 - beta1_power)
        m = slots["m"] + (grad - slots["m"]) * (1 - jnp.float32(self._beta1))
        v = slots["v"] + (grad * grad - slots["v"]) * (1 - jnp.float32(self._beta2))
        return var - lr * m / (jnp.sqrt(v) + self._epsilon), {"m": m, "v": v}

    def _apply_sparse(self, grad, var, slots, step):
        beta1_power, beta2_power = step.non_slots["beta1_power"], step.non_slots["beta2_power"]
        lr = step.learning_rate * jnp.sqrt(1 - beta2_power) / (1 - beta1_power)
        b1, b2 = jnp.float32(self._beta1), jnp.float32(self._beta2)
        m_t = (
            slots["m"].at[grad.indices].set(b1 * slots["m"][grad.indices] + (1 - b1) * grad.values)
        )
        v_t = (
            slots["v"]
            .at[grad.indices]
            .set(b2 * slots["v"][grad.indices] + (1 - b2) * jnp.square(grad.values))
        )
        m_t_slice, v_t_slice = m_t[grad.indices], v_t[grad.indices]
        var_update = var.at[grad.indices].add(
            -lr * m_t_slice / (jnp.sqrt(v_t_slice) + self._epsilon)
        )
        return var_update, {"m": m_t, "v": v_t}

    def _finish(self, non_slots, step):
        return {
            "beta1_power": non_slots["beta1_power"] * jnp.float32(self._beta1),
            "beta2_power": non_slots["beta2_power"] * jnp.float32(self._beta2),
        }


class Factored(fg.train.TF1Optimizer):
    """Slots that depend on the variable (as Adafactor's): ``vr``/``vc`` for a matrix, ``v``
    otherwise, all named ``Adafactor`` (numbered ``_1`` by TensorFlow)."""

    slots: ClassVar[dict[str, str]] = {"vr": "Adafactor", "vc": "Adafactor", "v": "Adafactor"}

    def _slots_of(self, var):
        return ("vr", "vc") if var.ndim == 2 else ("v",)

    def _slot_initial(self, key, var):
        if key == "vr":
            return jnp.zeros(var.shape[:1], var.dtype)
        if key == "vc":
            return jnp.zeros(var.shape[1:], var.dtype)
        return jnp.zeros_like(var)

    def _apply_dense(self, grad, var, slots, step):
        if var.ndim == 2:
            vr = slots["vr"] + jnp.mean(grad * grad, axis=1)
            vc = slots["vc"] + jnp.mean(grad * grad, axis=0)
            return var - step.learning_rate * grad, {"vr": vr, "vc": vc}
        v = slots["v"] + grad * grad
        return var - step.learning_rate * grad, {"v": v}


_rng = np.random.default_rng(3)
PARAMS = {
    "emb": jnp.asarray(_rng.normal(size=(5, 2)), jnp.float32),
    "dense": {
        "kernel": jnp.asarray(_rng.normal(size=(2, 3)), jnp.float32),
        "bias": jnp.zeros(3, jnp.float32),
    },
}
IDS = jnp.array([0, 3, 0])


def _loss(params, ids=IDS):
    h = params["emb"][ids] @ params["dense"]["kernel"] + params["dense"]["bias"][None, :]
    return jnp.mean(jnp.tanh(h) ** 2)


def _steps(opt, state, n=3):
    step = jax.jit(lambda s: opt.minimize(_loss, s)[0])
    for _ in range(n):
        state = step(state)
    return state


def test_a_built_in_optimizer_written_on_the_base_gives_its_numbers() -> None:
    ours, builtin = LazyAdam(0.1), fg.train.LazyAdamOptimizer(0.1)
    got, want = _steps(ours, ours.init(PARAMS)), _steps(builtin, builtin.init(PARAMS))
    chex.assert_trees_all_close(got.params, want.params, rtol=1e-6, atol=1e-7)
    untouched = np.array([1, 2, 4])  # rows IDS never reads: the sparse rule leaves them
    np.testing.assert_array_equal(got.params["emb"][untouched], PARAMS["emb"][untouched])
    assert not np.allclose(got.params["emb"][0], PARAMS["emb"][0])


def test_tf_names_are_the_declared_ones_and_read_a_built_in_checkpoint(tmp_path) -> None:
    builtin, ours = fg.train.LazyAdamOptimizer(0.1), LazyAdam(0.1)
    state = _steps(builtin, builtin.init(PARAMS))
    prefix = fg.train.save_tf_checkpoint(str(tmp_path / "a" / "m"), state, builtin)
    restored = fg.train.restore_tf_checkpoint(prefix, ours.init(PARAMS), ours)
    again = fg.train.save_tf_checkpoint(str(tmp_path / "b" / "m"), restored, ours)
    names = sorted(_tf_bundle.BundleReader(again).entries)
    assert names == sorted(_tf_bundle.BundleReader(prefix).entries)
    assert {"emb/Adam", "emb/Adam_1", "beta1_power", "dense/kernel/Adam_1"} <= set(names)
    chex.assert_trees_all_close(
        _steps(ours, restored).params, _steps(builtin, state).params, rtol=1e-6, atol=1e-7
    )


def test_slots_that_depend_on_the_variable_are_numbered_as_tensorflow_does(tmp_path) -> None:
    opt = Factored(0.1)
    state = _steps(opt, opt.init(PARAMS), 2)
    prefix = fg.train.save_tf_checkpoint(str(tmp_path / "m"), state, opt)
    names = set(_tf_bundle.BundleReader(prefix).entries)
    assert names == {
        "emb", "emb/Adafactor", "emb/Adafactor_1", "dense/kernel", "dense/kernel/Adafactor",
        "dense/kernel/Adafactor_1", "dense/bias", "dense/bias/Adafactor", "global_step",
    }  # fmt: skip
    restored = fg.train.restore_tf_checkpoint(prefix, opt.init(PARAMS), opt)
    chex.assert_trees_all_equal(restored, state)


def test_the_sparse_rule_sees_the_summed_rows_and_the_name() -> None:
    seen = {}

    class Rows(fg.train.TF1Optimizer):
        def _apply_dense(self, grad, var, slots, step):
            return var - step.learning_rate * grad, {}

        def _apply_sparse(self, grad, var, slots, step):
            seen[step.name] = (grad.indices, grad.values)
            return var.at[grad.indices].add(-step.learning_rate * grad.values), {}

    opt = Rows(1.0)
    g = fg.IndexedSlices(jnp.ones((3, 2)), jnp.array([4, 1, 4]), (5, 2))
    state = opt.apply_gradients([(g, PARAMS["emb"])], opt.init(PARAMS))
    ids, values = seen["emb"]
    assert ids.tolist() == [1, 4, 5]  # sorted, summed, padded with the table's length
    assert values[:2].tolist() == [[1.0, 1.0], [2.0, 2.0]]
    want = np.asarray(PARAMS["emb"]) - np.asarray(g.to_dense())
    np.testing.assert_allclose(state.params["emb"], want, rtol=1e-6)


def test_prepare_runs_once_per_step_and_every_rule_reads_its_values() -> None:
    prepared, seen = [], []

    class Shared(fg.train.TF1Optimizer):
        def _prepare(self, step):
            prepared.append(step.name)
            return {"rate": 2 * step.learning_rate}

        def _apply_dense(self, grad, var, slots, step):
            seen.append(("dense", step.name))
            return var - step.prepared["rate"] * grad, {}

        def _apply_sparse(self, grad, var, slots, step):
            seen.append(("sparse", step.name))
            return var.at[grad.indices].add(-step.prepared["rate"] * grad.values), {}

        def _finish(self, non_slots, step):
            seen.append(("finish", float(step.prepared["rate"])))
            return non_slots

    opt = Shared(0.25)
    state = opt.init(PARAMS)
    gvs = opt.compute_gradients(_loss, state.params)
    new = opt.apply_gradients(gvs, state)
    # once for the dense rules (and _finish), once for the sparse rule: name "" both times
    assert prepared == ["", ""]
    assert sorted(seen) == [
        ("dense", "dense/bias"), ("dense", "dense/kernel"), ("finish", 0.5), ("sparse", "emb"),
    ]  # fmt: skip
    dense = jax.tree.map(lambda g: g.to_dense() if isinstance(g, fg.IndexedSlices) else g, gvs)
    for (g, v), got in zip(dense, jax.tree.leaves(new.params), strict=True):
        np.testing.assert_allclose(got, v - 0.5 * g, rtol=1e-6)


def test_a_step_after_init_does_not_trace_the_optimizers_init_again() -> None:
    # init records the structure of its state; the step checks the state against it
    inits = []
    counted = optax.GradientTransformation(
        lambda p: inits.append(1) or optax.sgd(0.1).init(p), optax.sgd(0.1).update
    )
    opt = fg.train.Optimizer(counted)
    state = opt.init({"w": jnp.ones(3)})
    jax.jit(lambda s: opt.minimize(lambda p: jnp.sum(p["w"] ** 2), s)[0]).trace(state)
    assert len(inits) == 1
    other = fg.train.Optimizer(counted)  # no init of its own: it traces tx.init once
    jax.jit(lambda s: other.minimize(lambda p: jnp.sum(p["w"] ** 2), s)[0]).trace(state)
    jax.jit(lambda s: other.minimize(lambda p: jnp.sum(p["w"] ** 2), s)[0]).trace(state)
    assert len(inits) == 2
    with pytest.raises(ValueError, match=r"state\.opt_state was not made by this optimizer"):
        fg.train.AdamOptimizer(0.1).minimize(lambda p: jnp.sum(p["w"] ** 2), state)


def test_without_a_sparse_rule_the_dense_rule_gets_the_dense_gradient() -> None:
    opt = fg.train.AdamWeightDecayOptimizer(0.1)
    state = opt.init(PARAMS)
    gvs = opt.compute_gradients(_loss, state.params)
    assert isinstance(gvs[-1][0], fg.IndexedSlices)  # emb
    dense = [(g.to_dense() if isinstance(g, fg.IndexedSlices) else g, v) for g, v in gvs]
    chex.assert_trees_all_close(
        opt.apply_gradients(gvs, state), opt.apply_gradients(dense, state), rtol=1e-6
    )
    after = opt.apply_gradients(gvs, state).opt_state.inner_state.slots["adam_m"]["emb"]
    assert np.all(after[np.array([1, 2, 4])] == 0)  # rows of zero gradient


def test_jit_with_a_donated_state_leaves_the_optimizer_whole() -> None:
    opt = LazyAdam(0.1)
    step = jax.jit(lambda s: opt.minimize(_loss, s)[0], donate_argnums=0)
    for _ in range(2):
        state = opt.init(jax.tree.map(jnp.copy, PARAMS))  # its params are donated too
        leaves = jax.tree.leaves(state.opt_state)
        assert len({id(x) for x in leaves}) == len(leaves)
        state = step(step(state))
    chex.assert_trees_all_close(state.params, _steps(opt, opt.init(PARAMS), 2).params)


def test_tx_in_a_plain_optax_loop() -> None:
    opt = fg.train.AdamWeightDecayOptimizer(
        fg.train.exponential_decay(0.1, 1, 0.5), weight_decay_rate=0.1
    )
    params, opt_state = PARAMS, opt.tx.init(PARAMS)
    for _ in range(3):
        grads = jax.grad(_loss)(params)
        updates, opt_state = opt.tx.update(grads, opt_state, params)
        params = optax.apply_updates(params, updates)
    chex.assert_trees_all_close(params, _steps(opt, opt.init(PARAMS)).params, rtol=1e-5)


def test_group_loss_scale_wrappers_and_orbax(tmp_path) -> None:
    bert = fg.train.AdamWeightDecayOptimizer(0.1, weight_decay_rate=0.1)
    group = fg.train.OptimizerGroup(
        dense=(bert, ["dense/kernel", "dense/bias"]), emb=(LazyAdam(0.1), ["emb"])
    )
    state = group.init(PARAMS)
    step = jax.jit(lambda s: group["emb"].minimize(_loss, group["dense"].minimize(_loss, s)[0])[0])
    for _ in range(3):
        state = step(state)
    alone = _steps(bert, bert.init(PARAMS), 3)
    alone_lazy = _steps(LazyAdam(0.1), LazyAdam(0.1).init(PARAMS), 3)
    assert not np.allclose(state.params["dense"]["kernel"], alone.params["dense"]["kernel"])
    assert not np.allclose(state.params["emb"], alone_lazy.params["emb"])  # they took turns
    prefix = fg.train.save_tf_checkpoint(str(tmp_path / "g" / "m"), state, group)
    assert {"dense/kernel/adam_m", "emb/Adam_1", "beta2_power"} <= set(
        _tf_bundle.BundleReader(prefix).entries
    )
    restored = fg.train.restore_tf_checkpoint(prefix, group.init(PARAMS), group)
    chex.assert_trees_all_equal(restored.params, state.params)
    for name in group:  # each update count follows global_step, as a schedule's does
        chex.assert_trees_all_equal(
            restored.opt_state[name].inner_state, state.opt_state[name].inner_state
        )

    scaled = fg.train.LossScaleOptimizer(bert, dynamic=True, initial_scale=8.0)
    chex.assert_trees_all_close(_steps(scaled, scaled.init(PARAMS)).params, alone.params, rtol=1e-6)
    acc = fg.train.Optimizer(fg.train.accumulate_gradients(bert.tx, 1))
    chex.assert_trees_all_close(_steps(acc, acc.init(PARAMS)).params, alone.params, rtol=1e-6)

    checkpointer = fg.train.Checkpointer(tmp_path / "orbax")
    checkpointer.save(alone)
    chex.assert_trees_all_equal(checkpointer.restore(bert.init(PARAMS)), alone)


def test_bad_hyperparameters_are_clear_errors() -> None:
    with pytest.raises(TypeError, match=r"beta_1 must be a number, got '0\.9'; pass Python"):
        fg.train.AdamWeightDecayOptimizer(0.1, beta_1="0.9")
    with pytest.raises(TypeError, match="must be None or a list of regular expressions"):
        fg.train.AdamWeightDecayOptimizer(0.1, exclude_from_weight_decay="bias")
    with pytest.raises(ValueError, match="not a regular expression"):
        fg.train.AdamWeightDecayOptimizer(0.1, exclude_from_weight_decay=["bias("])
    with pytest.raises(TypeError, match=r"beta1 must be a number.*epsilon must be a number"):
        fg.train.AdaMaxOptimizer(0.1, beta1=[0.9], epsilon=None)
    with pytest.raises(
        TypeError, match=r"sign_decay_fn must be a function of global_step, got 0\.5"
    ):
        fg.train.PowerSignOptimizer(0.1, sign_decay_fn=0.5)
    with pytest.raises(ValueError, match=r"momentum must be finite and >= 0, got -0\.5; pass"):
        fg.train.LARSOptimizer(0.1, momentum=-0.5)
    lars = fg.train.LARSOptimizer(0.1, skip_list=["batch_normalization"])
    with pytest.raises(ValueError, match=r"skip_list=\['batch_normalization'\] matches none"):
        lars.minimize(_loss, lars.init(PARAMS))
    with pytest.raises(TypeError, match="base must be a number"):
        fg.train.PowerSignOptimizer(0.1, base="e")
    with pytest.raises(TypeError, match="learning_rate must be a number or a schedule"):
        fg.train.AdamWeightDecayOptimizer("0.1")


def test_an_exclusion_that_matches_no_variable_is_an_error() -> None:
    opt = fg.train.AdamWeightDecayOptimizer(
        0.1, weight_decay_rate=0.01, exclude_from_weight_decay=["LayerNorm", "layer_norm"]
    )
    with pytest.raises(ValueError, match=r"matches none of the variables.*variable_names"):
        opt.minimize(_loss, opt.init(PARAMS))
    fine = fg.train.AdamWeightDecayOptimizer(0.1, exclude_from_weight_decay=["LayerNorm"])
    fine.minimize(_loss, fine.init(PARAMS))  # no decay: nothing to exclude from
    lamb = fg.train.LAMBOptimizer(0.1, exclude_from_layer_adaptation=["LayerNorm"])
    with pytest.raises(ValueError, match=r"exclude_from_layer_adaptation=\['LayerNorm'\] matches"):
        lamb.minimize(_loss, lamb.init(PARAMS))
    with pytest.raises(TypeError, match="exclude_from_layer_adaptation must be None or a list"):
        fg.train.LAMBOptimizer(0.1, exclude_from_layer_adaptation="bias")


def test_lamb_trust_ratio_is_over_the_whole_variable() -> None:
    opt = fg.train.LAMBOptimizer(0.1, exclude_from_layer_adaptation=["bias"])
    state = opt.init(PARAMS)
    grads = jax.grad(_loss)(PARAMS)
    gvs = [(g, v) for g, v in zip(jax.tree.leaves(grads), jax.tree.leaves(PARAMS), strict=True)]
    new = opt.apply_gradients(gvs, state).params["dense"]["kernel"]
    g, w = np.asarray(grads["dense"]["kernel"], np.float64), np.asarray(PARAMS["dense"]["kernel"])
    u = 0.1 * g / (np.sqrt(0.001 * g * g) + 1e-6)
    want = w - np.linalg.norm(w) / np.linalg.norm(u) * 0.1 * u
    np.testing.assert_allclose(new, want, rtol=1e-5)


def test_a_subclass_that_breaks_the_contract_gets_a_clear_error() -> None:
    class Forgets(fg.train.TF1Optimizer):
        slots: ClassVar[dict[str, str]] = {"m": "M"}

        def _apply_dense(self, grad, var, slots, step):
            return var - grad, {}

    class Unknown(Forgets):
        def _slots_of(self, var):
            return ("n",)

    class Nothing(fg.train.TF1Optimizer):
        pass

    with pytest.raises(
        ValueError,
        match=r"no new value for the slots \['m'\].*return the variable and every one of its slots",
    ):
        Forgets(0.1).minimize(_loss, Forgets(0.1).init(PARAMS))
    with pytest.raises(ValueError, match="declare every slot in slots"):
        Unknown(0.1).init(PARAMS)
    with pytest.raises(NotImplementedError, match="writes _apply_dense"):
        Nothing(0.1).minimize(_loss, Nothing(0.1).init(PARAMS))
    opt = Nothing(0.1)
    with pytest.raises(ValueError, match=r"call tx.update\(updates, state, params\)"):
        opt.tx.update(PARAMS, opt.tx.init(PARAMS))


def test_a_variable_without_gradient_keeps_its_slots_and_non_slots_advance_once() -> None:
    opt = fg.train.NadamOptimizer(0.1)
    state = opt.init(PARAMS)
    state = opt.apply_gradients([(g, v) for g, v in opt.compute_gradients(_loss, PARAMS)], state)
    kept = opt.apply_gradients([(jnp.ones((5, 2)), state.params["emb"])], state)
    chex.assert_trees_all_equal(kept.params["dense"], state.params["dense"])
    chex.assert_trees_all_equal(
        kept.opt_state.inner_state.slots["m"]["dense"],
        state.opt_state.inner_state.slots["m"]["dense"],
    )
    powers = kept.opt_state.inner_state.non_slots
    np.testing.assert_allclose(powers["beta1_power"], np.float32(0.9) ** 3, rtol=1e-6)


def test_bfloat16_variables_follow_the_float32_steps() -> None:
    opt = fg.train.AdamWeightDecayOptimizer(0.01, weight_decay_rate=0.1)
    low = jax.tree.map(lambda x: x.astype(jnp.bfloat16), PARAMS)
    got = _steps(opt, opt.init(low)).params
    want = _steps(opt, opt.init(jax.tree.map(lambda x: x.astype(jnp.float32), low))).params
    assert jax.tree.leaves(got)[0].dtype == jnp.bfloat16
    chex.assert_trees_all_close(
        jax.tree.map(lambda x: x.astype(jnp.float32), got), want, atol=2e-2, rtol=2e-2
    )


def test_decoupled_weight_decay_without_decay_is_the_wrapped_optimizer() -> None:
    for decayed, plain in [
        (fg.train.AdamWOptimizer(0.0, 0.1), fg.train.AdamOptimizer(0.1)),
        (
            fg.train.MomentumWOptimizer(0.0, 0.1, 0.9, True),
            fg.train.MomentumOptimizer(0.1, 0.9, use_nesterov=True),
        ),
    ]:
        got, want = _steps(decayed, decayed.init(PARAMS)), _steps(plain, plain.init(PARAMS))
        chex.assert_trees_all_close(got.params, want.params, rtol=1e-6)


def test_decay_var_list_in_each_form_of_var_list_decays_those_variables_only() -> None:
    opt = fg.train.MomentumWOptimizer(0.5, 0.1, 0.9)
    forms = [
        ["dense/kernel"],
        ("dense/kernel",),
        lambda name, leaf: name.endswith("kernel") and leaf.ndim == 2,
        {"emb": False, "dense": {"kernel": True, "bias": False}},
    ]
    plain = fg.train.MomentumWOptimizer(0.0, 0.1, 0.9)
    undecayed = plain.minimize(_loss, plain.init(PARAMS))[0].params
    for form in forms:
        state = opt.minimize(_loss, opt.init(PARAMS), decay_var_list=form)[0]
        gvs = opt.compute_gradients(_loss, PARAMS)
        applied = opt.apply_gradients(gvs, opt.init(PARAMS), decay_var_list=form)
        chex.assert_trees_all_equal(applied.params, state.params)
        chex.assert_trees_all_close(state.params["emb"], undecayed["emb"])
        chex.assert_trees_all_close(state.params["dense"]["bias"], undecayed["dense"]["bias"])
        kernel = undecayed["dense"]["kernel"] - 0.5 * PARAMS["dense"]["kernel"]
        chex.assert_trees_all_close(state.params["dense"]["kernel"], kernel, rtol=1e-6)
    everything = opt.minimize(_loss, opt.init(PARAMS))[0].params  # the call's list is gone
    chex.assert_trees_all_close(everything["emb"][0], undecayed["emb"][0] - 0.5 * PARAMS["emb"][0])
    chex.assert_trees_all_equal(everything["emb"][1], PARAMS["emb"][1])  # a row never read


def test_decoupled_weight_decay_under_jit_with_a_donated_state() -> None:
    opt = fg.train.AdamWOptimizer(0.1, 0.01)
    step = jax.jit(lambda s: opt.minimize(_loss, s, decay_var_list=["emb"])[0], donate_argnums=0)
    state = step(step(opt.init(jax.tree.map(jnp.copy, PARAMS))))
    eager = opt.init(PARAMS)
    for _ in range(2):
        eager = opt.minimize(_loss, eager, decay_var_list=["emb"])[0]
    chex.assert_trees_all_close(state.params, eager.params, rtol=1e-6)
    assert opt.tf_names(PARAMS)[1] == ["beta1_power", "beta2_power"]
    assert opt.tf_names(PARAMS)[0][0] == [("m", "AdamW"), ("v", "AdamW")]


def test_decoupled_weight_decay_bad_input_is_a_clear_error() -> None:
    with pytest.raises(TypeError, match=r"weight_decay must be a number, got '0\.1'; pass"):
        fg.train.AdamWOptimizer("0.1")
    with pytest.raises(TypeError, match="momentum must be a number"):
        fg.train.MomentumWOptimizer(0.1, 0.1, None)
    with pytest.raises(
        TypeError, match=r"weight_decay is a function that fails as schedule\(step\)"
    ):
        fg.train.MomentumWOptimizer(lambda step: "0.1", 0.1, 0.9)
    opt = fg.train.AdamWOptimizer(0.1)
    state = opt.init(PARAMS)
    with pytest.raises(TypeError, match=r"var_list is the string 'emb'; pass a list.*\['emb'\]"):
        opt.minimize(_loss, state, decay_var_list="emb")
    with pytest.raises(ValueError, match=r"'dense/kernal' \(did you mean 'dense/kernel'"):
        opt.minimize(_loss, state, decay_var_list=["dense/kernal"])
    gvs = opt.compute_gradients(_loss, PARAMS)
    for none in [[], lambda name, _: "LayerNorm" in name, {"emb": False, "dense": False}]:
        with pytest.raises(ValueError, match=r"selects none of the variables.*decay_var_list=None"):
            opt.apply_gradients(gvs, state, decay_var_list=none)
    for mask in [{"emb": "yes", "dense": False}, {"emb": jnp.ones(5, bool), "dense": False}]:
        with pytest.raises(TypeError, match="must hold Python bools"):
            opt.minimize(_loss, state, decay_var_list=mask)
    with pytest.raises(TypeError, match="global_step"):
        opt.apply_gradients(gvs, state, global_step=3)


def test_decoupled_weight_decay_in_a_group_a_loss_scale_and_a_checkpoint(tmp_path) -> None:
    adamw = fg.train.AdamWOptimizer(0.1, 0.01)
    alone = _steps(adamw, adamw.init(PARAMS))
    scaled = fg.train.LossScaleOptimizer(adamw, dynamic=True, initial_scale=8.0)
    chex.assert_trees_all_close(_steps(scaled, scaled.init(PARAMS)).params, alone.params)
    group = fg.train.OptimizerGroup(
        dense=(adamw, ["dense/kernel", "dense/bias"]),
        emb=(fg.train.MomentumWOptimizer(0.1, 0.1, 0.9), ["emb"]),
    )
    state = jax.jit(lambda s: group.minimize(_loss, s)[0])(group.init(PARAMS))
    prefix = fg.train.save_tf_checkpoint(str(tmp_path / "g" / "m"), state, group)
    assert {"dense/kernel/AdamW", "dense/kernel/AdamW_1", "emb/MomentumW", "beta1_power"} <= set(
        _tf_bundle.BundleReader(prefix).entries
    )
    restored = fg.train.restore_tf_checkpoint(prefix, group.init(PARAMS), group)
    chex.assert_trees_all_equal(restored.params, state.params)
