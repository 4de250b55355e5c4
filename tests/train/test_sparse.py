"""apply_gradients with an fg.IndexedSlices gradient: the sparse rules and their compositions.

TensorFlow's own numbers are in tests/parity/test_sparse_optimizers_parity.py; here the
rules' properties (untouched rows and slots, duplicates summed, out-of-range ids) and
every composition: jit, a plain optax optimizer, accumulation, non-finite skipping, an
OptimizerGroup, loss scaling, data parallelism and both checkpoint formats.
"""

import chex
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import funcgrad as fg

V, D = 6, 2
TABLE = jnp.asarray(np.random.default_rng(0).normal(size=(V, D)).astype(np.float32))
IDS = jnp.array([1, 4, 1], jnp.int32)
VALUES = jnp.array([[0.5, -1.0], [2.0, 0.25], [-0.75, 1.5]], jnp.float32)
UNTOUCHED = np.array([0, 2, 3, 5])

OPTIMIZERS = [
    pytest.param(lambda: fg.train.GradientDescentOptimizer(0.1), id="sgd"),
    pytest.param(lambda: fg.train.MomentumOptimizer(0.1, 0.9), id="momentum"),
    pytest.param(lambda: fg.train.MomentumOptimizer(0.1, 0.9, use_nesterov=True), id="nesterov"),
    pytest.param(lambda: fg.train.LazyAdamOptimizer(0.1), id="lazy_adam"),
    pytest.param(lambda: fg.train.RMSPropOptimizer(0.1, momentum=0.5), id="rmsprop"),
    pytest.param(lambda: fg.train.RMSPropOptimizer(0.1, centered=True), id="rmsprop_centered"),
    pytest.param(lambda: fg.train.AdagradOptimizer(0.1), id="adagrad"),
    pytest.param(lambda: fg.train.AdadeltaOptimizer(1.0), id="adadelta"),
    pytest.param(lambda: fg.train.FtrlOptimizer(0.1, l1_regularization_strength=0.01), id="ftrl"),
    pytest.param(
        lambda: fg.train.ProximalGradientDescentOptimizer(0.1, 0.01, 0.01), id="proximal_sgd"
    ),
    pytest.param(
        lambda: fg.train.ProximalAdagradOptimizer(0.1, l1_regularization_strength=0.1),
        id="proximal_adagrad",
    ),
]


def _sparse(values=VALUES, ids=IDS):
    return fg.IndexedSlices(values, ids, (V, D))


def _slots(opt, state):
    """Each slot of the table, as an array (the optax state's table-shaped leaves)."""
    return [x for x in jax.tree.leaves(state.opt_state) if jnp.shape(x) == (V, D)]


@pytest.mark.parametrize("make", OPTIMIZERS)
def test_untouched_rows_and_their_slots_do_not_change(make) -> None:
    opt = make()
    state = opt.init({"E": TABLE})
    for _ in range(3):  # a first step sets the slots; the later ones start from them
        new = opt.apply_gradients([(_sparse(), None)], state)
        np.testing.assert_array_equal(new.params["E"][UNTOUCHED], state.params["E"][UNTOUCHED])
        for before, after in zip(_slots(opt, state), _slots(opt, new), strict=True):
            np.testing.assert_array_equal(after[UNTOUCHED], before[UNTOUCHED])
        assert not np.allclose(new.params["E"][1], state.params["E"][1])
        state = new


@pytest.mark.parametrize("make", OPTIMIZERS)
def test_duplicate_ids_are_summed_first(make) -> None:
    """Two rows of one id give the step of their sum (TF's _deduplicate_indexed_slices)."""
    opt = make()
    state = opt.init({"E": TABLE})
    summed = _sparse(jnp.stack([VALUES[0] + VALUES[2], VALUES[1]]), jnp.array([1, 4]))
    got = opt.apply_gradients([(_sparse(), None)], state)
    want = opt.apply_gradients([(summed, None)], state)
    chex.assert_trees_all_close(got, want, rtol=1e-6)


def test_adam_sparse_rule_moves_every_row_as_tensorflow() -> None:
    """TF's sparse Adam decays m everywhere: once a row has momentum, it keeps moving."""
    opt = fg.train.AdamOptimizer(0.1)
    state = opt.apply_gradients([(_sparse(), None)], opt.init({"E": TABLE}))
    later = opt.apply_gradients([(_sparse(ids=jnp.array([0, 0, 0])), None)], state)
    assert not np.allclose(later.params["E"][4], state.params["E"][4])  # row 4 not in the ids
    lazy = fg.train.LazyAdamOptimizer(0.1)
    state = lazy.apply_gradients([(_sparse(), None)], lazy.init({"E": TABLE}))
    later = lazy.apply_gradients([(_sparse(ids=jnp.array([0, 0, 0])), None)], state)
    np.testing.assert_array_equal(later.params["E"][4], state.params["E"][4])


def test_sgd_sparse_equals_dense() -> None:
    opt = fg.train.GradientDescentOptimizer(0.1)
    state = opt.init({"E": TABLE})
    got = opt.apply_gradients([(_sparse(), None)], state)
    want = opt.apply_gradients([(_sparse().to_dense(), None)], state)
    chex.assert_trees_all_close(got, want, rtol=1e-6)


def test_sgd_scatters_duplicates_as_they_are_and_drops_ids_outside_under_jit() -> None:
    """TF's GradientDescent scatter-adds each row (no sum first): the same numbers; an id
    outside the table (negative too) writes nothing, never a wrapped or clamped row."""
    opt = fg.train.GradientDescentOptimizer(0.5)
    values = jnp.asarray(np.arange(8.0).reshape(4, 2), jnp.float32)
    g = fg.IndexedSlices(values, jnp.array([1, 1, -1, 9]), TABLE.shape)
    got = jax.jit(opt.apply_gradients)([(g, None)], opt.init(TABLE))
    want = np.asarray(TABLE).copy()
    want[1] -= 0.5 * (np.asarray(values[0]) + np.asarray(values[1]))
    np.testing.assert_allclose(got.params, want, rtol=1e-6)


def test_lazy_adam_with_a_dense_gradient_is_adam() -> None:
    g = _sparse().to_dense()
    lazy, adam = fg.train.LazyAdamOptimizer(0.1), fg.train.AdamOptimizer(0.1)
    got = lazy.apply_gradients([(g, None)], lazy.init(TABLE))
    chex.assert_trees_all_equal(got, adam.apply_gradients([(g, None)], adam.init(TABLE)))


def test_a_jitted_step_traces_once_and_equals_the_eager_one() -> None:
    opt = fg.train.MomentumOptimizer(0.1, 0.9)
    params = {"E": TABLE, "W": jnp.ones(3)}

    @jax.jit
    @chex.assert_max_traces(n=1)
    def step(state, ids):
        return opt.apply_gradients([(_sparse(ids=ids), None), (jnp.ones(3), None)], state)

    state = eager = opt.init(params)
    for ids in ([1, 4, 1], [0, 0, 5], [2, 3, 2]):
        state = step(state, jnp.array(ids))
        eager = opt.apply_gradients(
            [(_sparse(ids=jnp.array(ids)), None), (jnp.ones(3), None)], eager
        )
    chex.assert_trees_all_close(state, eager, rtol=1e-6)


def test_a_dense_and_a_sparse_variable_in_one_step() -> None:
    """The dense one goes through the optax update; Adam's beta powers advance once."""
    opt = fg.train.LazyAdamOptimizer(0.1)
    state = opt.init({"E": TABLE, "W": jnp.ones(3)})
    state = opt.apply_gradients([(_sparse(), None), (jnp.ones(3), None)], state)
    adam = state.opt_state.inner_state[0]
    assert float(adam.beta1_power) == np.float32(0.9) * np.float32(0.9)
    np.testing.assert_allclose(state.params["W"], 0.9, rtol=1e-6)


def test_an_out_of_range_id_outside_jit_is_an_error() -> None:
    opt = fg.train.MomentumOptimizer(0.1, 0.9)
    with pytest.raises(
        ValueError, match=r"id 9 gathers a row of E, a table of 6 rows.*keep every id"
    ):
        opt.apply_gradients([(_sparse(ids=jnp.array([1, 9, -1])), None)], opt.init({"E": TABLE}))


def test_an_out_of_range_id_under_jit_writes_no_row() -> None:
    """JAX's indexing wraps -1 to the last row and clamps 9 to it; the step writes neither."""
    opt = fg.train.MomentumOptimizer(0.1, 0.9)
    state = opt.init({"E": TABLE})
    step = jax.jit(lambda s, ids: opt.apply_gradients([(_sparse(ids=ids), None)], s))
    new = step(state, jnp.array([1, 9, -1]))
    changed = np.flatnonzero(np.any(np.asarray(new.params["E"] != TABLE), axis=1))
    assert changed.tolist() == [1]


def test_a_gradient_of_another_shape_is_an_error() -> None:
    opt = fg.train.MomentumOptimizer(0.1, 0.9)
    wrong = fg.IndexedSlices(VALUES, IDS, (V + 1, D))
    with pytest.raises(ValueError, match=r"has shape \(7, 2\), the variable \(6, 2\).*keep"):
        opt.apply_gradients([(wrong, None)], opt.init({"E": TABLE}))


def test_bfloat16_table_keeps_its_dtype_and_computes_in_float32() -> None:
    opt = fg.train.LazyAdamOptimizer(0.1)
    state = opt.init({"E": TABLE.astype(jnp.bfloat16)})
    new = opt.apply_gradients([(_sparse(), None)], state)
    assert new.params["E"].dtype == jnp.bfloat16
    assert {s.dtype for s in _slots(opt, new)} == {jnp.dtype(jnp.bfloat16)}
    np.testing.assert_allclose(
        new.params["E"][1].astype(np.float32), (TABLE[1] - 0.1 * jnp.sign(VALUES[0] + VALUES[2])),
        atol=0.02,
    )  # fmt: skip


def test_a_plain_optax_optimizer_gets_the_dense_gradient() -> None:
    """fg.train.Optimizer(tx) has no sparse rule: the gradient is made dense (to_dense)."""
    opt = fg.train.Optimizer(optax.sgd(0.1, momentum=0.9))
    state = opt.init({"E": TABLE})
    got = opt.apply_gradients([(_sparse(), None)], opt.apply_gradients([(_sparse(), None)], state))
    dense = _sparse().to_dense()
    want = opt.apply_gradients([(dense, None)], opt.apply_gradients([(dense, None)], state))
    chex.assert_trees_all_equal(got, want)


def test_accumulate_gradients_makes_it_dense() -> None:
    inner = fg.train.MomentumOptimizer(0.1, 0.9)
    opt = fg.train.Optimizer(fg.train.accumulate_gradients(inner.tx, 2))
    state = opt.init({"E": TABLE})
    for _ in range(2):
        state = opt.apply_gradients([(_sparse(), None)], state)
    want = inner.apply_gradients([(_sparse().to_dense(), None)], inner.init({"E": TABLE}))
    np.testing.assert_allclose(state.params["E"], want.params["E"], rtol=1e-6)


def test_skip_nonfinite_makes_it_dense_and_skips_a_nan_row() -> None:
    opt = fg.train.Optimizer(fg.train.skip_nonfinite(fg.train.MomentumOptimizer(0.1, 0.9).tx))
    state = opt.init({"E": TABLE})
    bad = _sparse(VALUES.at[0, 0].set(jnp.nan))
    state = opt.apply_gradients([(bad, None)], state)
    np.testing.assert_array_equal(state.params["E"], TABLE)
    assert int(fg.train.skipped_steps(state).total) == 1


def test_an_optimizer_group_member_keeps_its_sparse_rule() -> None:
    momentum = fg.train.MomentumOptimizer(0.1, 0.9)
    group = fg.train.OptimizerGroup(emb=(momentum, ["E"]), dense=(fg.train.AdamOptimizer(), ["W"]))
    params = {"E": TABLE, "W": jnp.ones(3)}
    state = group["emb"].apply_gradients([(_sparse(), params["E"])], group.init(params))
    want = momentum.apply_gradients([(_sparse(), None)], momentum.init({"E": TABLE}))
    np.testing.assert_array_equal(state.params["E"], want.params["E"])
    np.testing.assert_array_equal(state.params["E"][UNTOUCHED], TABLE[UNTOUCHED])


def test_loss_scale_optimizer_keeps_it_sparse_and_skips_a_nan_row() -> None:
    inner = fg.train.MomentumOptimizer(0.1, 0.9)
    opt = fg.train.LossScaleOptimizer(inner)
    state = opt.apply_gradients([(_sparse(), None)], opt.init({"E": TABLE}))
    want = inner.apply_gradients([(_sparse(), None)], inner.init({"E": TABLE}))
    np.testing.assert_array_equal(state.params["E"], want.params["E"])
    skipped = opt.apply_gradients([(_sparse(VALUES.at[2, 1].set(jnp.inf)), None)], state)
    np.testing.assert_array_equal(skipped.params["E"], state.params["E"])
    assert int(skipped.global_step) == int(state.global_step)


def test_data_parallel_step_equals_the_single_device_step() -> None:
    opt = fg.train.LazyAdamOptimizer(0.1)

    def step(state, ids):
        return opt.apply_gradients([(_sparse(jnp.ones((8, D)), ids), None)], state)

    mesh = jax.make_mesh((8,), ("data",))
    ids = jnp.array([0, 1, 1, 2, 5, 5, 5, 3])
    state = opt.init({"E": TABLE})
    got = fg.train.data_parallel(step, mesh)(state, ids)
    chex.assert_trees_all_close(got, jax.jit(step)(state, ids), rtol=1e-6)


def test_checkpointer_round_trip_after_sparse_steps(tmp_path) -> None:
    pytest.importorskip("orbax.checkpoint")
    opt = fg.train.MomentumOptimizer(0.1, 0.9)
    state = opt.apply_gradients([(_sparse(), None)], opt.init({"E": TABLE}))
    with fg.train.Checkpointer(tmp_path) as ckpt:
        ckpt.save(state)
        restored = ckpt.restore(opt.init({"E": jnp.zeros((V, D))}))
    chex.assert_trees_all_equal(restored, state)


def test_tf_checkpoint_round_trip_after_sparse_steps(tmp_path) -> None:
    """The slots keep the table's shape, so a TF1 checkpoint holds them as TF's Saver does."""
    opt = fg.train.LazyAdamOptimizer(0.1)
    state = opt.init({"E": TABLE})
    for ids in ([1, 4, 1], [0, 0, 5]):
        state = opt.apply_gradients([(_sparse(ids=jnp.array(ids)), None)], state)
    prefix = fg.train.save_tf_checkpoint(str(tmp_path / "model.ckpt-2"), state, opt)
    restored = fg.train.restore_tf_checkpoint(prefix, opt.init({"E": jnp.zeros((V, D))}), opt)
    chex.assert_trees_all_equal(restored, state)
