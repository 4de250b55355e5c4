"""apply_gradients takes any subset of compute_gradients' pairs, in any order (TF's
filtered-gvs idiom), matched by identity — and refuses whatever would be a guess."""

import pickle

import chex
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import funcgrad as fg
from tests.train_steps import JIT
from tests.train_steps import compiled

PARAMS = {
    "W": jnp.array([[1.0, 2.0], [3.0, 4.0]]),
    "b": jnp.array([0.5, -0.5]),
    "frozen": jnp.array([7.0, 8.0, 9.0]),
}
X = jnp.array([1.0, -2.0])


def _loss(params, x):
    """Depends on W and b; the loss does not reach "frozen" (a None gradient)."""
    return jnp.sum(jnp.tanh(params["W"] @ x + params["b"]) ** 2)


def _reference(trained, steps):
    """Plain jax.grad + optax momentum over the ``trained`` subset of PARAMS only."""
    tx = optax.sgd(0.1, momentum=0.9)
    sub = {k: PARAMS[k] for k in trained}
    tx_state = tx.init(sub)
    for _ in range(steps):
        grads = jax.grad(lambda s: _loss({**PARAMS, **s}, X))(sub)
        updates, tx_state = tx.update(grads, tx_state, sub)
        sub = optax.apply_updates(sub, updates)
    return {**PARAMS, **sub}


@JIT
def test_the_tf_filter_idiom_applies_the_kept_pairs(jit) -> None:
    opt = fg.train.MomentumOptimizer(0.1, 0.9)

    def step(state, x):
        gvs = opt.compute_gradients(_loss, state.params, x)
        return opt.apply_gradients([(g, v) for g, v in gvs if g is not None], state)

    step = compiled(step, jit)
    state = opt.init(PARAMS)
    for _ in range(3):
        state = step(state, X)
    chex.assert_trees_all_close(state.params, _reference(["W", "b"], 3), rtol=1e-6)
    assert int(state.global_step) == 3


@JIT
def test_a_subset_in_any_order_trains_only_its_variables_and_slots(jit) -> None:
    opt = fg.train.MomentumOptimizer(0.1, 0.9)

    def step(state, x):
        gvs = opt.compute_gradients(_loss, state.params, x)
        return opt.apply_gradients([(None, gvs[2][1]), gvs[0]], state)  # W, and frozen

    step = compiled(step, jit)
    state = opt.init(PARAMS)
    for _ in range(3):
        state = step(state, X)
    chex.assert_trees_all_close(state.params, _reference(["W"], 3), rtol=1e-6)
    # b had gradients every step, but no pair: its momentum slot is still zero.
    np.testing.assert_array_equal(jax.tree.leaves(state.opt_state)[2], jnp.zeros(2))


def test_reversed_full_list_equals_the_ordered_one() -> None:
    opt = fg.train.AdamOptimizer(0.1)
    state = opt.init(PARAMS)
    gvs = opt.compute_gradients(_loss, state.params, X)
    in_order = opt.apply_gradients(gvs, state)
    reversed_ = opt.apply_gradients(gvs[::-1], state)
    chex.assert_trees_all_equal(in_order, reversed_)


@pytest.mark.parametrize(
    "variable",
    [
        pytest.param(lambda v: None, id="none"),
        pytest.param(lambda v: jnp.array(v), id="copy"),
        pytest.param(np.asarray, id="numpy"),
    ],
)
def test_a_full_list_in_order_still_works_by_position(variable) -> None:
    opt = fg.train.MomentumOptimizer(0.1, 0.9)
    state = opt.init(PARAMS)
    gvs = opt.compute_gradients(_loss, state.params, X)
    by_position = opt.apply_gradients([(g, variable(v)) for g, v in gvs], state)
    chex.assert_trees_all_equal(by_position, opt.apply_gradients(gvs, state))


def test_pairs_crossing_a_jit_boundary_work_as_a_full_list() -> None:
    opt = fg.train.MomentumOptimizer(0.1, 0.9)
    chex.clear_trace_counter()
    apply = jax.jit(chex.assert_max_traces(opt.apply_gradients, n=1))
    state = opt.init(PARAMS)
    for _ in range(3):
        state = apply(opt.compute_gradients(_loss, state.params, X), state)
    chex.assert_trees_all_close(state.params, _reference(["W", "b"], 3), rtol=1e-6)


def test_a_filtered_list_crossing_a_jit_boundary_is_an_error_that_says_why() -> None:
    opt = fg.train.MomentumOptimizer(0.1, 0.9)
    state = opt.init(PARAMS)
    gvs = opt.compute_gradients(_loss, state.params, X)
    with pytest.raises(
        ValueError,
        match=r"2 pairs for 3 variables.*pair 0's variable \(float32\[2, 2\]\) is not an "
        r"array of state\.params.*under jax\.jit, filter them inside the jitted function",
    ):
        jax.jit(opt.apply_gradients)([(g, v) for g, v in gvs if g is not None], state)


def test_a_copy_in_a_subset_matches_no_variable() -> None:
    opt = fg.train.GradientDescentOptimizer(0.1)
    state = opt.init(PARAMS)
    g, v = opt.compute_gradients(_loss, state.params, X)[1]
    with pytest.raises(ValueError, match=r"pair 0's variable \(float32\[2\]\) is not an array"):
        opt.apply_gradients([(g, jnp.array(v))], state)


def test_one_array_object_in_two_leaves_is_ambiguous_in_a_rebuilt_subset() -> None:
    shared = jnp.array([1.0, 2.0])
    params = {"a": shared, "b": shared}
    opt = fg.train.GradientDescentOptimizer(0.5)
    state = opt.init(params)
    gvs = opt.compute_gradients(lambda p: jnp.sum(p["a"] * 3.0 + p["b"]), state.params)
    with pytest.raises(
        ValueError,
        match=r"pair 0's variable is the same array object as variables \['a', 'b'\], so it "
        "could be any of them",
    ):
        opt.apply_gradients([(g, v) for g, v in gvs[:1]], state)
    # compute_gradients' own pair knows it is a's, and the full list is unambiguous.
    only_a = opt.apply_gradients(gvs[:1], state)
    np.testing.assert_allclose(only_a.params["a"], [-0.5, 0.5])
    np.testing.assert_array_equal(only_a.params["b"], shared)
    state = opt.apply_gradients(gvs, state)
    np.testing.assert_allclose(state.params["a"], [-0.5, 0.5])
    np.testing.assert_allclose(state.params["b"], [0.5, 1.5])


def test_inside_jit_two_leaves_of_one_array_are_two_tracers() -> None:
    shared = jnp.array([1.0, 2.0])
    opt = fg.train.GradientDescentOptimizer(0.5)

    @jax.jit
    def step(state):
        gvs = opt.compute_gradients(lambda p: jnp.sum(p["a"] * 3.0 + p["b"]), state.params)
        return opt.apply_gradients(gvs[:1], state)

    state = step(opt.init({"a": shared, "b": shared}))
    np.testing.assert_allclose(state.params["a"], [-0.5, 0.5])
    np.testing.assert_array_equal(state.params["b"], shared)


def test_two_pairs_for_one_variable_are_an_error() -> None:
    opt = fg.train.GradientDescentOptimizer(0.1)
    state = opt.init(PARAMS)
    gvs = opt.compute_gradients(_loss, state.params, X)
    with pytest.raises(
        ValueError,
        match=r"pairs 0 and 1 both name variable 'W' \(sum their gradients into one pair\)",
    ):
        opt.apply_gradients([gvs[0], gvs[0], gvs[1]], state)


def test_pairs_of_another_state_match_nothing() -> None:
    opt = fg.train.GradientDescentOptimizer(0.1)
    state = opt.init(PARAMS)
    gvs = opt.compute_gradients(_loss, state.params, X)
    newer = opt.apply_gradients(gvs, state)
    with pytest.raises(ValueError, match=r"pair 0's variable \(float32\[2, 2\]\) is not an array"):
        opt.apply_gradients(gvs[:2], newer)


# Reordered lists: every pair lands on its own variable or the list is refused.
SHARED = jnp.array([1.0, -2.0])
TWINS = {"W": jnp.array([[1.0, 2.0], [3.0, 4.0]]), "a": SHARED, "b": SHARED, "c": jnp.ones(3)}
ORDERS = {
    "in_order": [0, 1, 2, 3],
    "reversed": [3, 2, 1, 0],
    "shuffled": [2, 0, 3, 1],
    "subset": [3, 1],
    "unshared_subset": [3, 0],
    "reversed_subset": [2, 0],
}


def _twins_loss(p):
    """Each variable gets its own gradient, a and b (one array object) included."""
    return (
        jnp.sum(p["W"] @ jnp.array([1.0, -1.0]))
        + jnp.sum(3.0 * p["a"] + p["b"] ** 2)
        + jnp.sum(p["c"] ** 3)
    )


def _sgd_reference(params, applied):
    """params - 0.5 * jax.grad for the variables named in ``applied``, the rest unchanged."""
    grads = jax.grad(_twins_loss)({k: jnp.array(v) for k, v in params.items()})
    return {k: v - 0.5 * grads[k] if k in applied else v for k, v in params.items()}


SOURCES = {
    "eager": lambda opt, params: opt.compute_gradients(_twins_loss, params),
    "jit_outputs": lambda opt, params: jax.jit(lambda p: opt.compute_gradients(_twins_loss, p))(
        params
    ),
    "numpy": lambda opt, params: jax.device_get(opt.compute_gradients(_twins_loss, params)),
}


@pytest.mark.parametrize("source", SOURCES)
@pytest.mark.parametrize("order", ORDERS)
@pytest.mark.parametrize("apply_jit", [False, True], ids=["eager_apply", "jit_apply"])
def test_compute_gradients_pairs_find_their_variables_in_any_order(source, order, apply_jit):
    opt = fg.train.GradientDescentOptimizer(0.5)
    state = opt.init(TWINS)
    gvs = SOURCES[source](opt, state.params)
    pairs = [gvs[i] for i in ORDERS[order]]
    apply = jax.jit(opt.apply_gradients) if apply_jit else opt.apply_gradients
    new = apply(pairs, state)
    applied = [["W", "a", "b", "c"][i] for i in ORDERS[order]]
    chex.assert_trees_all_close(new.params, _sgd_reference(TWINS, applied), rtol=1e-6)


@pytest.mark.parametrize("source", SOURCES)
@pytest.mark.parametrize("order", ORDERS)
@pytest.mark.parametrize("apply_jit", [False, True], ids=["eager_apply", "jit_apply"])
def test_rebuilt_pairs_are_applied_right_or_refused(source, order, apply_jit):
    """Plain tuples, as [(clip(g), v) for g, v in gvs] makes them, lose the pairs' names:
    only identity with the state's own arrays (eagerly; a and b are one object, so not
    they) tells their variable, and everything else is refused."""
    opt = fg.train.GradientDescentOptimizer(0.5)
    state = opt.init(TWINS)
    gvs = SOURCES[source](opt, state.params)
    pairs = [tuple(gvs[i]) for i in ORDERS[order]]
    apply = jax.jit(opt.apply_gradients) if apply_jit else opt.apply_gradients
    if source == "eager" and not apply_jit and not {1, 2} & set(ORDERS[order]):
        new = apply(pairs, state)
        applied = [["W", "a", "b", "c"][i] for i in ORDERS[order]]
        chex.assert_trees_all_close(new.params, _sgd_reference(TWINS, applied), rtol=1e-6)
    else:
        with pytest.raises(ValueError, match=r"pass the pairs compute_gradients returned"):
            apply(pairs, state)


def test_rebuilt_copies_of_one_shape_are_refused_even_in_order() -> None:
    opt = fg.train.GradientDescentOptimizer(0.5)
    state = opt.init({"b1": jnp.zeros(2), "b2": jnp.zeros(2), "W": jnp.ones((2, 2))})
    gvs = jax.jit(
        lambda p: opt.compute_gradients(lambda q: jnp.sum(q["W"] @ q["b1"] + q["b2"]), p)
    )(state.params)
    with pytest.raises(
        ValueError,
        match=r"pairs \[0, 1\] are placed by position only .* variables \['W', 'b1', 'b2'\]|"
        r"variables \['b1', 'b2'\] all are float32\[2\], so a reordered list would go unnoticed"
        r".*pass the pairs compute_gradients returned",
    ):
        opt.apply_gradients([(g, v) for g, v in gvs], state)
    # compute_gradients' own pairs and None variables (which state the order) work.
    named = opt.apply_gradients(gvs, state)
    declared = opt.apply_gradients([(g, None) for g, _ in gvs], state)
    chex.assert_trees_all_equal(named, declared)


def test_rebuilt_copies_of_distinct_shapes_work_in_order_only() -> None:
    opt = fg.train.GradientDescentOptimizer(0.1)
    state = opt.init(PARAMS)
    gvs = jax.jit(lambda p: opt.compute_gradients(_loss, p, X))(state.params)
    rebuilt = [(None if g is None else jnp.clip(g, -1.0, 1.0), v) for g, v in gvs]
    expected = opt.apply_gradients(
        [
            (None if g is None else jnp.clip(g, -1.0, 1.0), v)
            for g, v in opt.compute_gradients(_loss, state.params, X)
        ],
        state,
    )
    chex.assert_trees_all_equal(opt.apply_gradients(rebuilt, state), expected)
    chex.assert_trees_all_equal(jax.jit(opt.apply_gradients)(rebuilt, state), expected)
    with pytest.raises(
        ValueError,
        match=r"pair 0's variable \(float32\[3\]\) is not a copy of 'W' \(float32\[2, 2\]\), "
        r"the variable at its position.*pass the pairs",
    ):
        opt.apply_gradients(rebuilt[::-1], state)


def test_a_pair_of_another_parameter_structure_is_refused() -> None:
    opt = fg.train.GradientDescentOptimizer(0.1)
    gvs = opt.compute_gradients(
        lambda p: jnp.sum(p["x"] ** 2), {"x": jnp.ones(2), "y": jnp.ones(2)}
    )
    state = opt.init({"y": jnp.ones(2), "z": jnp.ones(2)})
    with pytest.raises(
        ValueError,
        match=r"pair 0 belongs to variable 'x' \(number 0 of 2\), which is not a variable of "
        r"state\.params.*pass the pairs compute_gradients returned for state\.params",
    ):
        opt.apply_gradients(gvs[:1], state)


def test_compute_gradients_pairs_are_tuples_that_pickle_and_map() -> None:
    opt = fg.train.GradientDescentOptimizer(0.1)
    gvs = jax.jit(lambda p: opt.compute_gradients(_loss, p, X))(PARAMS)
    g, v = gvs[2]
    assert isinstance(gvs[2], tuple) and repr(gvs[2]) == repr((g, v))
    doubled = jax.tree.map(lambda x: 2 * x, gvs)
    np.testing.assert_array_equal(doubled[0][1], 2 * PARAMS["W"])
    state = opt.init(PARAMS)
    kept = pickle.loads(pickle.dumps(jax.device_get(gvs)))[:2][::-1]
    chex.assert_trees_all_equal(opt.apply_gradients(kept, state), opt.apply_gradients(gvs, state))


@JIT
@pytest.mark.parametrize(
    ("gradient", "match"),
    [
        pytest.param(
            jnp.array([1.0 + 2.0j, 0.5j]),
            r"the gradient of 'b' is complex64, the variable float32.*jnp\.real\(g\)",
            id="complex",
        ),
        pytest.param(
            jnp.array([True, False]),
            r"the gradient of 'b' is bool, the variable float32.*g\.astype\(jnp\.float32\)",
            id="bool",
        ),
    ],
)
def test_a_gradient_whose_cast_loses_its_meaning_is_refused(jit, gradient, match) -> None:
    opt = fg.train.GradientDescentOptimizer(0.1)
    state = opt.init(PARAMS)
    apply = compiled(opt.apply_gradients, jit)
    with pytest.raises(TypeError, match=match):
        apply([(gradient, None) if k == 1 else (None, None) for k in range(3)], state)


# Lists that would apply the wrong numbers: each is refused with the fix.
@JIT
def test_pairs_in_tensorflows_wrong_order_are_refused(jit) -> None:
    """zip(variables, grads): a variable of the state where the gradient goes (TF's
    "Trying to update a Tensor")."""
    opt = fg.train.MomentumOptimizer(0.1, 0.9)

    def step(state, x):
        grads, variables = zip(*opt.compute_gradients(_loss, state.params, x), strict=True)
        return opt.apply_gradients(zip(variables, grads, strict=True), state)

    with pytest.raises(
        ValueError,
        match=r"pairs \[0, 1, 2\] hold variables \['W', 'b', 'frozen'\] of state\.params where "
        r"the gradient goes; write the pairs gradient first: zip\(grads, variables\)",
    ):
        compiled(step, jit)(opt.init(PARAMS), X)


def test_copies_in_tensorflows_wrong_order_are_refused() -> None:
    """zip(variables, grads) with variables that crossed a jax.jit boundary: no identity
    to see, but a copy must hold its position's values."""
    opt = fg.train.MomentumOptimizer(0.1, 0.9)
    state = opt.init(PARAMS)
    gvs = jax.jit(lambda p: opt.compute_gradients(_loss, p, X))(state.params)
    grads, variables = zip(*gvs, strict=True)
    with pytest.raises(
        ValueError,
        match=r"pair 0's variable \(float32\[2, 2\]\) is not a copy of 'W' \(float32\[2, 2\]\), "
        r"the variable at its position but its gradient is: write zip\(grads, variables\)",
    ):
        opt.apply_gradients(zip(variables, grads, strict=True), state)


def test_a_gradient_that_is_a_variable_is_applied_with_its_variable() -> None:
    """(w, w) names its variable: a decay step, as in TensorFlow."""
    opt = fg.train.GradientDescentOptimizer(0.5)
    state = opt.init(PARAMS)
    w = state.params["b"]
    state = opt.apply_gradients([(w, w)], state)
    np.testing.assert_allclose(state.params["b"], 0.5 * PARAMS["b"])


# Two variables of one shape but other dtypes, and two of one kind.
MIXED = {"a": jnp.array([1.0, 2.0, 3.0]), "b": jnp.array([4.0, 5.0, 6.0], jnp.bfloat16)}
TWO_OF_A_KIND = {"a": jnp.array([1.0, 2.0, 3.0]), "b": jnp.array([4.0, 5.0, 6.0])}


def _both(p):
    return jnp.sum(p["a"] ** 2) + jnp.sum(p["b"].astype(jnp.float32) * 3.0)


def _copies(opt, params):
    """Rebuilt pairs (plain tuples) whose variables are jax.jit outputs, not the state's."""
    gvs = jax.jit(lambda p: opt.compute_gradients(_both, p))(params)
    return [tuple(pair) for pair in gvs]


@pytest.mark.parametrize("apply_jit", [False, True], ids=["eager_apply", "jit_apply"])
def test_reversed_copies_of_one_shape_and_other_dtypes_are_refused(apply_jit) -> None:
    opt = fg.train.GradientDescentOptimizer(0.5)
    state = opt.init(MIXED)
    apply = jax.jit(opt.apply_gradients) if apply_jit else opt.apply_gradients
    with pytest.raises(
        ValueError,
        match=r"pair 0's variable \(bfloat16\[3\]\) is not a copy of 'a' "
        r"\(float32\[3\]\), the variable at its position.*\"Filtered and reordered pairs\"",
    ):
        apply(_copies(opt, state.params)[::-1], state)
    # In order, shapes and dtypes prove the positions.
    expected = opt.apply_gradients(opt.compute_gradients(_both, state.params), state)
    chex.assert_trees_all_equal(apply(_copies(opt, state.params), state), expected)


@pytest.mark.parametrize("apply_jit", [False, True], ids=["eager_apply", "jit_apply"])
@pytest.mark.parametrize(
    "params",
    [
        pytest.param(TWO_OF_A_KIND, id="other_values"),
        pytest.param({"a": jnp.zeros(3), "b": jnp.zeros(3)}, id="equal_values"),
    ],
)
def test_none_and_a_copy_of_one_kind_are_refused_in_any_order(params, apply_jit) -> None:
    """(g, None) states its position, but a copy beside it of the same shape and dtype
    could be the other variable's."""
    opt = fg.train.GradientDescentOptimizer(0.5)
    state = opt.init(params)
    apply = jax.jit(opt.apply_gradients) if apply_jit else opt.apply_gradients
    (ga, _), (gb, vb) = _copies(opt, state.params)
    for pairs in ([(gb, vb), (ga, None)], [(ga, None), (gb, vb)]):
        with pytest.raises(ValueError, match=r"pass the pairs compute_gradients returned"):
            apply(pairs, state)
