"""Which variables get an IndexedSlices gradient (funcgrad._core.sparse_reads), and its numbers.

The reference for the values is independent of the detection: ``jax.grad`` of the same
loss written as a function of the gathered rows themselves; for the whole gradient,
``jax.grad`` of the loss with respect to the table (the dense gradient TensorFlow's
``tf.convert_to_tensor`` of the IndexedSlices equals).
"""

import chex
import equinox as eqx
import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

import funcgrad as fg

V, D = 7, 3
TABLE = jnp.asarray(np.random.default_rng(0).normal(size=(V, D)), jnp.float32)
W = jnp.asarray(np.random.default_rng(1).normal(size=(D, 2)), jnp.float32)
IDS = jnp.array([4, 1, 4, 6], jnp.int32)


def head(rows, w):
    """The rest of the model: a dense layer and a smooth loss."""
    return jnp.sum(jnp.tanh(rows @ w) ** 2)


def rows_gradient(ids, w=W):
    """The cotangent of each gathered row, from the loss as a function of the rows."""
    return jax.grad(head)(TABLE[ids], w)


def sparse_gradients(loss, *xs):
    return fg.gradients(loss, list(xs), indexed_slices=True)


def assert_slices(g, indices, values, dense_reference):
    assert isinstance(g, fg.IndexedSlices)
    assert g.dense_shape == TABLE.shape
    np.testing.assert_array_equal(g.indices, indices)
    np.testing.assert_allclose(g.values, values, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(g.to_dense(), dense_reference, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(
    "lookup",
    [
        pytest.param(lambda e, ids: jnp.take(e, ids, axis=0), id="take"),
        pytest.param(lambda e, ids: e[ids], id="getitem"),
        pytest.param(lambda e, ids: e.at[ids].get(), id="at_get"),
        pytest.param(
            lambda e, ids: lax.gather(
                e,
                ids[:, None],
                lax.GatherDimensionNumbers(
                    offset_dims=(1,), collapsed_slice_dims=(0,), start_index_map=(0,)
                ),
                slice_sizes=(1, D),
                mode=lax.GatherScatterMode.CLIP,
            ),
            id="lax_gather",
        ),
        pytest.param(lambda e, ids: jax.vmap(lambda i: e[i])(ids), id="vmapped_getitem"),
    ],
)
def test_row_lookups_give_indexed_slices(lookup, variant):
    def loss(e, w):
        return head(lookup(e, IDS), w)

    g_table, g_w = variant(lambda e, w: sparse_gradients(loss, e, w))(TABLE, W)
    dense = jax.grad(loss)(TABLE, W)
    assert_slices(g_table, IDS, rows_gradient(IDS), dense)
    np.testing.assert_allclose(g_w, jax.grad(loss, argnums=1)(TABLE, W), rtol=1e-5, atol=1e-6)


def test_duplicates_are_kept_as_rows():
    g = sparse_gradients(lambda e: jnp.sum(e[jnp.array([2, 2, 2])] ** 2), TABLE)[0]
    assert g.values.shape == (3, D)
    np.testing.assert_allclose(
        g.values, np.tile(2 * np.asarray(TABLE[2]), (3, 1)), rtol=1e-5, atol=1e-6
    )


def test_ids_of_any_shape_are_flattened_row_major():
    ids = jnp.array([[0, 5], [5, 3]])

    def loss(e):
        return head(e[ids].reshape(4, D), W)

    g = sparse_gradients(loss, TABLE)[0]
    assert_slices(g, [0, 5, 5, 3], rows_gradient(ids.reshape(-1)), jax.grad(loss)(TABLE))


def test_a_traced_scalar_id_reads_one_row(variant):
    def loss(e, i):
        return jnp.sum(jnp.sin(e[i]))

    g = variant(lambda e, i: fg.gradients(lambda e: loss(e, i), e, indexed_slices=True))(
        TABLE, jnp.int32(5)
    )
    assert_slices(g, [5], jnp.cos(TABLE[5])[None], jax.grad(loss)(TABLE, 5))


def test_two_lookups_of_one_table_are_concatenated_in_lookup_order():
    first, second = jnp.array([3, 0]), jnp.array([0, 6, 6])

    def loss(e):
        return jnp.sum(e[first] ** 3) + head(jnp.take(e, second, axis=0), W)

    g = sparse_gradients(loss, TABLE)[0]
    values = jnp.concatenate([3 * TABLE[first] ** 2, rows_gradient(second)])
    assert_slices(g, [3, 0, 0, 6, 6], values, jax.grad(loss)(TABLE))


def test_flax_embed_gives_indexed_slices():
    model = nn.Embed(V, D)
    params = model.init(jax.random.key(0), IDS)

    def loss(p):
        return head(model.apply(p, IDS), W)

    g = sparse_gradients(loss, params)[0]["params"]["embedding"]
    table = params["params"]["embedding"]
    dense = jax.grad(loss)(params)["params"]["embedding"]
    assert isinstance(g, fg.IndexedSlices)
    np.testing.assert_array_equal(g.indices, IDS)
    np.testing.assert_allclose(g.values, jax.grad(head)(table[IDS], W), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(g.to_dense(), dense, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("dtype", [jnp.bfloat16, jnp.float16])
def test_a_table_cast_whole_then_read_by_rows_gives_indexed_slices(dtype):
    # TensorFlow's Cast gradient keeps an IndexedSlices and casts its values back.
    def loss(e):
        return head(e.astype(dtype)[IDS].astype(jnp.float32), W)

    g = sparse_gradients(loss, TABLE)[0]
    assert isinstance(g, fg.IndexedSlices)
    assert g.values.dtype == jnp.float32
    np.testing.assert_array_equal(g.indices, IDS)
    rows = jax.grad(head)(TABLE.astype(dtype)[IDS].astype(jnp.float32), W)
    np.testing.assert_array_equal(g.values, rows.astype(dtype).astype(jnp.float32))
    np.testing.assert_array_equal(g.to_dense(), jax.grad(loss)(TABLE))


def test_flax_embed_computing_in_bfloat16_gives_indexed_slices():
    model = nn.Embed(V, D, dtype=jnp.bfloat16)  # float32 table, cast whole, then gathered
    params = model.init(jax.random.key(0), IDS)

    def loss(p):
        return head(model.apply(p, IDS).astype(jnp.float32), W)

    g = sparse_gradients(loss, params)[0]["params"]["embedding"]
    assert isinstance(g, fg.IndexedSlices)
    np.testing.assert_array_equal(g.indices, IDS)
    np.testing.assert_array_equal(g.to_dense(), jax.grad(loss)(params)["params"]["embedding"])


def test_equinox_embedding_gives_indexed_slices():
    layer = eqx.nn.Embedding(V, D, key=jax.random.key(0))

    def loss(weight):
        return head(jax.vmap(eqx.tree_at(lambda m: m.weight, layer, weight))(IDS), W)

    g = sparse_gradients(loss, layer.weight)[0]
    assert isinstance(g, fg.IndexedSlices)
    np.testing.assert_array_equal(g.indices, IDS)
    np.testing.assert_allclose(g.values, jax.grad(head)(layer.weight[IDS], W), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(g.to_dense(), jax.grad(loss)(layer.weight), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(
    "loss",
    [
        pytest.param(lambda e: head(e[IDS], W) + jnp.sum(e @ W), id="gather_and_matmul"),
        pytest.param(lambda e: head(e[IDS], W) + jnp.sum(e), id="gather_and_sum"),
        pytest.param(lambda e: jnp.sum(jnp.take(e, jnp.array([0, 2]), axis=1) ** 2), id="columns"),
        pytest.param(lambda e: jnp.sum(e[3] ** 2), id="static_row"),
        pytest.param(
            lambda e: (
                head(e.astype(jnp.bfloat16)[IDS].astype(e.dtype), W)
                + jnp.sum(e.astype(jnp.bfloat16).astype(e.dtype))
            ),
            id="cast_read_by_rows_and_summed",
        ),
        pytest.param(
            lambda e: jnp.sum(lax.scan(lambda c, i: (c.at[i].mul(2.0), None), e, IDS)[0] ** 2),
            id="scan_carry",
        ),
        pytest.param(
            lambda e: (
                lax.scan(lambda c, i: (c + jnp.sum(e[i] ** 2), None), 0.0, IDS)[0] + jnp.sum(e)
            ),
            id="inside_scan_and_dense",
        ),
    ],
)
def test_any_other_read_gives_a_dense_gradient(loss):
    g = sparse_gradients(loss, TABLE)[0]
    assert isinstance(g, jax.Array)
    np.testing.assert_allclose(g, jax.grad(loss)(TABLE), rtol=1e-5, atol=1e-6)


def test_dense_by_default():
    g = fg.gradients(lambda e: head(e[IDS], W), TABLE)
    assert isinstance(g, jax.Array)
    assert g.shape == TABLE.shape


def test_a_read_that_does_not_reach_the_loss_adds_no_rows():
    def loss(e):
        return head(e[IDS], W) + jnp.sum(lax.stop_gradient(e[jnp.array([0])]))

    g = sparse_gradients(loss, TABLE)[0]
    assert_slices(g, IDS, rows_gradient(IDS), jax.grad(loss)(TABLE))


@pytest.mark.parametrize("cut_first", [False, True], ids=["cut_second", "cut_first"])
def test_one_jitted_lookup_called_twice_adds_the_rows_of_the_call_that_reaches_the_loss(
    cut_first,
):
    # Both calls hold the one jaxpr JAX cached for the lookup: the reads are told apart
    # by the call that holds them.
    lookup = jax.jit(lambda e, ids: e[ids])
    other = jnp.array([0, 2, 5, 3], jnp.int32)

    def loss(e):
        cut = jnp.sum(lax.stop_gradient(lookup(e, other)))
        return cut + head(lookup(e, IDS), W) if cut_first else head(lookup(e, IDS), W) + cut

    g = sparse_gradients(loss, TABLE)[0]
    assert_slices(g, IDS, rows_gradient(IDS), jax.grad(loss)(TABLE))


def test_a_table_whose_reads_are_all_cut_gets_none():
    g = sparse_gradients(lambda e, w: head(lax.stop_gradient(e[IDS]), w), TABLE, W)
    assert g[0] is None


def test_compute_gradients_gives_indexed_slices(variant):
    opt = fg.train.GradientDescentOptimizer(0.1)
    params = {"embedding": TABLE, "w": W}

    def loss(p, ids):
        return head(p["embedding"][ids], p["w"])

    step = variant(lambda p, ids: opt.compute_gradients(loss, p, ids))
    (g_e, v_e), (g_w, _) = step(params, IDS)
    assert_slices(g_e, IDS, rows_gradient(IDS), jax.grad(loss)(params, IDS)["embedding"])
    np.testing.assert_allclose(g_w, jax.grad(loss)(params, IDS)["w"], rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(v_e, TABLE)


def test_compute_gradients_traces_once_under_jit():
    opt = fg.train.GradientDescentOptimizer(0.1)

    @jax.jit
    @chex.assert_max_traces(n=1)
    def step(params, ids):
        return opt.compute_gradients(lambda p, i: head(p[0][i], p[1]), params, ids)

    step((TABLE, W), IDS)
    step((TABLE + 1, W), jnp.array([0, 0, 1, 2]))


def test_compute_gradients_with_aux_and_grad_loss():
    opt = fg.train.GradientDescentOptimizer(0.1)

    def loss(e):
        rows = e[IDS]
        return jnp.sum(rows, axis=1), rows.shape

    (gvs, aux) = opt.compute_gradients(
        loss, TABLE, has_aux=True, grad_loss=jnp.array([1.0, 2.0, 3.0, 4.0])
    )
    g = gvs[0][0]
    assert aux == (4, D)
    np.testing.assert_array_equal(g.indices, IDS)
    np.testing.assert_array_equal(g.values, np.repeat([[1.0], [2.0], [3.0], [4.0]], D, axis=1))


def test_per_example_gradients_under_vmap():
    def per_example(ids):
        return fg.gradients(lambda e: head(e[ids], W), TABLE, indexed_slices=True)

    batch = jnp.array([[0, 1], [2, 2], [6, 3]])
    g = jax.vmap(per_example)(batch)
    assert g.values.shape == (3, 2, D)
    for b in range(3):
        np.testing.assert_array_equal(g.indices[b], batch[b])
        np.testing.assert_allclose(g.values[b], rows_gradient(batch[b]), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(
    ("ids", "bad"), [pytest.param([1, 9], 9, id="too_large"), pytest.param([-8, 0], -1, id="neg")]
)
def test_an_id_outside_the_table_is_an_error_naming_it(ids, bad):
    def loss(e):
        return jnp.sum(e[jnp.array(ids)])

    with pytest.raises(ValueError, match=rf"id {bad} gathers a row of xs\[0\], a table of 7 rows"):
        fg.gradients(loss, [TABLE], indexed_slices=True)
    opt = fg.train.AdamOptimizer(0.1)
    with pytest.raises(
        ValueError, match=r"compute_gradients.*gathers a row of emb.*keep every id in \[0, 7\)"
    ):
        opt.compute_gradients(lambda p: loss(p["emb"]), {"emb": TABLE})


def test_an_id_outside_the_table_adds_nothing_under_jit():
    g = jax.jit(
        lambda e: fg.gradients(lambda e: jnp.sum(e[jnp.array([1, 9])]), e, indexed_slices=True)
    )(TABLE)
    np.testing.assert_array_equal(g.indices, [1, 9])
    expected = np.zeros(TABLE.shape, np.float32)
    expected[1] = 1.0
    np.testing.assert_array_equal(g.to_dense(), expected)


def test_the_compiled_step_builds_no_table_sized_array():
    """The point of IndexedSlices: a (100000 x 8) table's gradient costs the batch."""
    table = jnp.zeros((100_000, 8), jnp.float32)
    w = jnp.ones((8, 1), jnp.float32)
    ids = jnp.arange(512, dtype=jnp.int32) * 7
    opt = fg.train.GradientDescentOptimizer(0.1)

    def loss(p, ids):
        return jnp.sum(jnp.tanh(p[0][ids] @ p[1]))

    def gradient_bytes(sparse):
        def grads(p, ids):
            return (
                [g for g, _ in opt.compute_gradients(loss, p, ids)]
                if sparse
                else jax.grad(loss)(p, ids)
            )

        memory = jax.jit(grads).lower((table, w), ids).compile().memory_analysis()
        return memory.temp_size_in_bytes + memory.output_size_in_bytes

    table_bytes = table.size * table.dtype.itemsize
    assert gradient_bytes(sparse=False) >= table_bytes  # the dense gradient: a table
    assert gradient_bytes(sparse=True) < table_bytes / 20


def test_inside_shard_map_each_device_gets_its_own_rows():
    """A replicated table, ids sharded: each device's rows, with no sum across devices."""
    mesh = jax.make_mesh((2,), ("d",))
    ids = jnp.array([0, 1, 4, 4, 6, 0], jnp.int32)

    def local(table, ids):
        g = fg.gradients(lambda e: jnp.sum(e[ids] ** 2), table, indexed_slices=True)
        return g.values, g.indices

    spec = jax.sharding.PartitionSpec
    sharded = jax.shard_map(
        local, mesh=mesh, in_specs=(spec(), spec("d")), out_specs=(spec("d"), spec("d"))
    )
    put = jax.device_put
    values, indices = jax.jit(sharded)(
        put(TABLE, jax.NamedSharding(mesh, spec())), put(ids, jax.NamedSharding(mesh, spec("d")))
    )
    np.testing.assert_array_equal(indices, ids)
    np.testing.assert_allclose(values, 2 * np.asarray(TABLE)[np.asarray(ids)], rtol=1e-6)


def test_lookups_with_ids_of_two_dtypes_concatenate():
    def loss(e):
        return jnp.sum(e[jnp.array([1, 2], jnp.int16)]) + jnp.sum(e[jnp.array([4], jnp.int32)])

    g = sparse_gradients(loss, TABLE)[0]
    assert g.indices.dtype == jnp.int32
    assert_slices(g, [1, 2, 4], np.ones((3, D)), jax.grad(loss)(TABLE))


OUT_OF_RANGE = jnp.array([1, 9, -1, 4], jnp.int32)  # 9 is past the 7 rows; -1 wraps to 6


@pytest.mark.parametrize(
    "lookup",
    [
        pytest.param(lambda e, ids: jnp.take(e, ids, axis=0, mode="clip"), id="take_clip"),
        pytest.param(lambda e, ids: jnp.take(e, ids, axis=0, mode="fill"), id="take_fill"),
        pytest.param(lambda e, ids: jnp.take(e, ids, axis=0, mode="wrap"), id="take_wrap"),
        pytest.param(lambda e, ids: jnp.take(e, ids, axis=0), id="take_default"),
        pytest.param(lambda e, ids: e[ids], id="getitem"),
        pytest.param(lambda e, ids: e.at[ids].get(mode="clip"), id="at_get_clip"),
        pytest.param(
            lambda e, ids: e.at[ids].get(mode="promise_in_bounds"), id="at_get_promise_in_bounds"
        ),
        pytest.param(lambda e, ids: jax.vmap(lambda i: e[i])(ids), id="vmapped_getitem"),
        pytest.param(
            lambda e, ids: lax.dynamic_index_in_dim(e, ids[1], keepdims=False)[None],
            id="dynamic_slice",
        ),
    ],
)
def test_the_mode_of_a_lookup_decides_its_rows_as_in_jax_grad(lookup):
    """An id past the table: the gradient goes where ``jax.grad`` puts it (the clamped
    row for ``mode="clip"`` and a ``dynamic_slice``, nowhere for a filled read)."""

    def loss(e, w):
        return jnp.sum(jnp.nan_to_num(jnp.tanh(lookup(e, OUT_OF_RANGE) @ w)) ** 2)

    g = jax.jit(lambda e, w: sparse_gradients(loss, e, w)[0])(TABLE, W)
    assert isinstance(g, fg.IndexedSlices)
    np.testing.assert_allclose(g.to_dense(), jax.grad(loss)(TABLE, W), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(
    ("lookup", "rows"),
    [
        pytest.param(
            lambda e, ids: jnp.take(e, ids, axis=0, mode="clip"), [1, 6, 0, 4], id="take_clip"
        ),
        pytest.param(lambda e, ids: e.at[ids].get(mode="clip"), [1, 6, 6, 4], id="at_get_clip"),
    ],
)
def test_a_clamping_lookup_outside_jit_is_no_error(lookup, rows):
    """``take`` clamps -1 to row 0; ``.at[].get`` wraps it to row 6 first."""

    def loss(e, w):
        return head(lookup(e, OUT_OF_RANGE), w)

    g = sparse_gradients(loss, TABLE, W)[0]
    np.testing.assert_array_equal(g.indices, rows)
    np.testing.assert_allclose(g.to_dense(), jax.grad(loss)(TABLE, W), rtol=1e-5, atol=1e-6)


# --- lookups inside control flow -------------------------------------------------------

STEPS = jnp.array([[4, 1], [1, 1], [6, 2]], jnp.int32)  # the ids of three iterations


def decoder(e, w):
    """A lookup in every step of a scan (the seq2seq decoder's habit)."""

    def step(h, ids):
        h = jnp.tanh(e[ids] @ w + h)
        return h, jnp.sum(h**2)

    _, losses = lax.scan(step, jnp.zeros((2, 2), jnp.float32), STEPS)
    return jnp.sum(losses)


def with_fori_loop(e, w):
    def body(k, h):
        return jnp.tanh(e[STEPS[k]] @ w + h)

    return jnp.sum(lax.fori_loop(0, 3, body, jnp.zeros((2, 2), jnp.float32)) ** 2)


def with_remat(e, w):
    return jax.checkpoint(lambda e, w: head(e[IDS], w))(e, w)


def with_nested_jit(e, w):
    inner = jax.jit(lambda e, ids: jnp.tanh(e[ids]))
    return head(jax.jit(lambda e: inner(e, IDS) * 2.0)(e), w)


def with_scan_of_scans(e, w):
    def outer(c, ids):
        return lax.scan(lambda c, i: (c + head(e[i][None], w), None), c, ids)[0], None

    return lax.scan(outer, 0.0, STEPS)[0]


def test_a_lookup_in_a_scan_gets_one_row_per_id_and_iteration_then_the_loops_row():
    """TensorFlow 1.x's while_loop gradient: every iteration's rows (duplicates kept),
    and the zero row at id 0 its accumulator starts with."""
    g = sparse_gradients(decoder, TABLE, W)[0]
    assert isinstance(g, fg.IndexedSlices)
    np.testing.assert_array_equal(g.indices, [4, 1, 1, 1, 6, 2, 0])
    np.testing.assert_array_equal(g.values[-1], np.zeros(D))
    np.testing.assert_allclose(g.to_dense(), jax.grad(decoder)(TABLE, W), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(
    ("loss", "rows"),
    [
        pytest.param(decoder, 7, id="scan"),
        pytest.param(with_fori_loop, 7, id="fori_loop"),
        pytest.param(with_scan_of_scans, 6 + 3 + 1, id="scan_of_scans"),
        pytest.param(with_remat, 4, id="remat"),
        pytest.param(with_nested_jit, 4, id="nested_jit"),
    ],
)
def test_compute_gradients_finds_lookups_inside(loss, rows, variant):
    opt = fg.train.GradientDescentOptimizer(0.1)
    params = {"emb": TABLE, "w": W}

    def grads(p):
        return [g for g, _ in opt.compute_gradients(lambda p: loss(p["emb"], p["w"]), p)]

    g, g_w = variant(grads)(params)
    assert isinstance(g, fg.IndexedSlices)
    assert g.values.shape == (rows, D)
    np.testing.assert_allclose(g.to_dense(), jax.grad(loss)(TABLE, W), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(g_w, jax.grad(loss, argnums=1)(TABLE, W), rtol=1e-5, atol=1e-6)


def in_cond(e, w, which):
    return lax.cond(which == 0, lambda: head(e[IDS], w), lambda: jnp.sum(w**2))


def in_switch(e, w, which):
    branches = [lambda: head(e[IDS], w), lambda: jnp.sum(w**2), lambda: head(e[IDS[:2]], w)]
    return lax.switch(which, branches)


@pytest.mark.parametrize(
    ("loss", "which", "indices"),
    [
        pytest.param(in_cond, 0, [4, 1, 4, 6, 4, 4, 4, 4, 4, 4, 4], id="cond_taken"),
        pytest.param(in_cond, 1, [0, 0, 0, 0, *range(V)], id="cond_not_taken"),
        pytest.param(
            in_switch, 2, [0, 0, 0, 0, *range(V), 4, 1, *[4] * V], id="switch_other_reader"
        ),
        pytest.param(in_switch, 1, [0, 0, 0, 0, *range(V), 0, 0, *range(V)], id="switch_no_reader"),
    ],
)
def test_a_lookup_in_a_cond_branch_not_taken_touches_every_row(loss, which, indices, variant):
    """TensorFlow 1.x's cond: a branch that reads the table gives its rows when taken,
    every row with zeros when not; padding repeats a touched id with zeros."""
    opt = fg.train.RMSPropOptimizer(0.1)
    params = {"emb": TABLE, "w": W}

    def grads(p, which):
        return [g for g, _ in opt.compute_gradients(lambda p: loss(p["emb"], p["w"], which), p)]

    g, _ = variant(grads)(params, jnp.int32(which))
    assert isinstance(g, fg.IndexedSlices)
    np.testing.assert_array_equal(g.indices, indices)
    dense = jax.grad(loss)(TABLE, W, which)
    np.testing.assert_allclose(g.to_dense(), dense, rtol=1e-5, atol=1e-6)


def test_a_lookup_in_a_while_loop_fails_as_jax_grad_does():
    def loss(e):
        return lax.while_loop(
            lambda c: c[0] < 3, lambda c: (c[0] + 1, c[1] + e[c[0]].sum()), (0, 0.0)
        )[1]

    with pytest.raises(
        ValueError, match=r"Reverse-mode differentiation does not work for lax\.while_loop"
    ):
        jax.grad(loss)(TABLE)
    opt = fg.train.GradientDescentOptimizer(0.1)
    with pytest.raises(
        ValueError, match=r"Reverse-mode differentiation does not work for lax\.while_loop"
    ):
        opt.compute_gradients(loss, TABLE)


# --- an empty batch of ids -------------------------------------------------------------

NO_IDS = jnp.zeros((0,), jnp.int32)


@pytest.mark.parametrize(
    "lookup",
    [
        pytest.param(lambda e, ids: e[ids], id="getitem"),
        pytest.param(lambda e, ids: jnp.take(e, ids, axis=0), id="take"),
        pytest.param(lambda e, ids: fg.nn.embedding_lookup(e, ids), id="embedding_lookup"),
        pytest.param(
            lambda e, ids: fg.nn.embedding_lookup(jnp.split(e, [4]), ids), id="split_table"
        ),
    ],
)
def test_an_empty_batch_of_ids_gives_an_empty_indexed_slices(lookup, variant):
    """JAX folds a gather of no ids into a constant; TensorFlow's gather still gives the
    table an empty IndexedSlices (it came back None, and minimize said "not used by f")."""
    opt = fg.train.GradientDescentOptimizer(0.1)

    def loss(p, ids):
        return head(lookup(p["emb"], ids), p["w"])

    (g, _), (g_w, _) = variant(lambda p, ids: opt.compute_gradients(loss, p, ids))(
        {"emb": TABLE, "w": W}, NO_IDS
    )
    assert isinstance(g, fg.IndexedSlices) and g.dense_shape == TABLE.shape
    assert g.values.shape == (0, D) and g.indices.shape == (0,)
    np.testing.assert_array_equal(g_w, np.zeros_like(W))  # the loss is 0 at every w
    state = opt.minimize(lambda e, ids: head(lookup(e, ids), W), opt.init(TABLE), NO_IDS)[0]
    np.testing.assert_array_equal(state.params, TABLE)


@pytest.mark.parametrize(
    "loss",
    [
        pytest.param(lambda e, w, ids: jnp.sum(w) + ids.sum().astype(w.dtype), id="table_not_read"),
        pytest.param(lambda e, w, ids: head(lax.stop_gradient(e[ids]), w), id="read_cut"),
        pytest.param(
            lambda e, w, ids: head(e[ids], w) + jnp.sum(ids.reshape(0, 2)).astype(w.dtype),
            id="fails_at_a_batch_of_one",
        ),
    ],
)
def test_an_empty_batch_of_ids_leaves_a_table_it_does_not_read_none(loss):
    opt = fg.train.GradientDescentOptimizer(0.1)
    (g, _), (g_w, _) = opt.compute_gradients(
        lambda p, ids: loss(p[0], p[1], ids), (TABLE, W), NO_IDS
    )
    assert g is None and g_w is not None


# --- slices and concatenations of tables -----------------------------------------------


def _fill_zeros(e, ids):
    """``e[ids]``, with zeros (and no read) past the end: JAX's padded lookup."""
    return e.at[ids].get(mode="fill", fill_value=0)


@pytest.mark.parametrize(
    ("lookup", "rows"),
    [
        pytest.param(lambda e, ids: e[2:7][ids], [6, 3, 6, 2], id="slice"),
        pytest.param(lambda e, ids: jnp.split(e, [2, 7])[1][ids], [6, 3, 6, 2], id="split"),
        pytest.param(
            lambda e, ids: jnp.concatenate(jnp.split(e, [3, 5]))[ids], [4, 1, 4, 0], id="split_back"
        ),
        pytest.param(
            lambda e, ids: jnp.concatenate([e[4:], e[:4]])[ids], [1, 5, 1, 4], id="rotated"
        ),
        pytest.param(lambda e, ids: e.astype(jnp.bfloat16)[1:][ids], [5, 2, 5, 1], id="cast_slice"),
    ],
)
def test_a_lookup_in_rows_of_a_table_is_a_lookup_in_the_table(lookup, rows, variant):
    """A partitioned variable restored whole and split back into its parts: the slices'
    reads are reads of the table (they were a dense gradient)."""
    ids = jnp.array([4, 1, 4, 0])

    def loss(e):
        return head(lookup(e, ids).astype(e.dtype), W)

    g = variant(lambda e: sparse_gradients(loss, e)[0])(TABLE)
    assert isinstance(g, fg.IndexedSlices)
    np.testing.assert_array_equal(g.indices, rows)
    np.testing.assert_allclose(g.to_dense(), jax.grad(loss)(TABLE), rtol=1e-5, atol=1e-6)


def test_a_lookup_in_two_tables_one_after_the_other_gives_each_its_rows(variant):
    """Each table gets the rows of its own positions: exactly those outside jax.jit (as
    TensorFlow's dynamic_partition), with zeros at id ``rows`` for the others' under it."""
    a, b = TABLE[:3], TABLE[3:]
    ids = jnp.array([4, 1, 5, 4])  # rows 1, 2, 1 of b and row 1 of a

    def loss(a, b):
        return head(jnp.concatenate([a, b])[ids], W)

    g_a, g_b = variant(lambda a, b: sparse_gradients(loss, a, b))(a, b)
    want_a, want_b = jax.grad(loss, argnums=(0, 1))(a, b)
    for g, want in ((g_a, want_a), (g_b, want_b)):
        assert isinstance(g, fg.IndexedSlices)
        np.testing.assert_allclose(g.to_dense(), want, rtol=1e-5, atol=1e-6)
    if isinstance(g_a.indices, jax.Array) and g_a.indices.shape == (1,):  # outside jit
        assert g_a.indices.tolist() == [1] and g_b.indices.tolist() == [1, 2, 1]
    else:
        assert g_a.indices.tolist() == [3, 1, 3, 3] and g_b.indices.tolist() == [1, 4, 2, 1]
        assert not np.any(g_a.values[np.array([0, 2, 3])]) and not np.any(g_b.values[1])


def test_a_lookup_filled_with_zeros_past_the_table_reads_nothing_there(variant):
    """``mode="fill", fill_value=0``: a padding id reads zeros and no row, so it is no
    error outside jax.jit and left out of the gradient (at id ``rows`` under it)."""
    ids = jnp.array([4, 7, 1, 9])

    def loss(e):
        return head(_fill_zeros(e, ids), W)

    g = variant(lambda e: sparse_gradients(loss, e)[0])(TABLE)
    np.testing.assert_allclose(g.to_dense(), jax.grad(loss)(TABLE), rtol=1e-5, atol=1e-6)
    kept = np.asarray(g.indices) < V
    np.testing.assert_array_equal(np.asarray(g.indices)[kept], [4, 1])
    assert not np.any(np.asarray(g.values)[~kept])


@pytest.mark.parametrize(
    "loss",
    [
        pytest.param(lambda e: head(e[::2][jnp.array([1, 2])], W), id="strided_slice"),
        pytest.param(lambda e: jnp.sum(e[:, :2][IDS] ** 2), id="columns_slice"),
        pytest.param(
            lambda e: head(jnp.concatenate([e, jnp.ones((1, D))])[IDS], W), id="concatenated_row"
        ),
        pytest.param(
            lambda e: jnp.sum(jnp.concatenate([e, e], axis=1)[IDS] ** 2), id="side_by_side"
        ),
        pytest.param(lambda e: jnp.sum(e[2:5] ** 2), id="slice_used_whole"),
    ],
)
def test_other_slices_and_concatenations_give_a_dense_gradient(loss):
    g = sparse_gradients(loss, TABLE)[0]
    assert isinstance(g, jax.Array)
    np.testing.assert_allclose(g, jax.grad(loss)(TABLE), rtol=1e-5, atol=1e-6)
