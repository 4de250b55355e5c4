"""One suite over every TF1 optimizer of ``fg.train.__all__``: jit, vmap, None
gradients, dtypes, pytrees, ``.tx``."""

import functools
import inspect

import chex
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import funcgrad as fg

#: What an optimizer's constructor requires besides its defaults.
_REQUIRED = {"learning_rate": 0.1, "momentum": 0.9, "weight_decay": 0.01}


def _every_optimizer() -> list:
    """Each ``TF1Optimizer`` class exported by ``fg.train``, built with its defaults."""
    found = []
    for name in sorted(fg.train.__all__):
        cls = getattr(fg.train, name)
        if not (isinstance(cls, type) and issubclass(cls, fg.train.TF1Optimizer)):
            continue
        if cls is fg.train.TF1Optimizer:
            continue
        parameters = inspect.signature(cls).parameters
        required = {k: v for k, v in _REQUIRED.items() if k in parameters}
        if parameters.get("learning_rate") is not None and "learning_rate" not in required:
            required["learning_rate"] = 0.1 if name != "AdafactorOptimizer" else None
        found.append(pytest.param(functools.partial(cls, **required), id=name))
    return found


#: Every optimizer, and the variants of some whose rule branches.
OPTIMIZERS = [
    *_every_optimizer(),
    pytest.param(lambda: fg.train.MomentumOptimizer(0.1, 0.9, use_nesterov=True), id="nesterov"),
    pytest.param(lambda: fg.train.RMSPropOptimizer(0.1, momentum=0.5), id="rmsprop_momentum"),
    pytest.param(lambda: fg.train.RMSPropOptimizer(0.1, centered=True), id="rmsprop_centered"),
    pytest.param(
        lambda: fg.train.FtrlOptimizer(0.1, l1_regularization_strength=0.01), id="ftrl_l1"
    ),
    pytest.param(lambda: fg.train.ProximalGradientDescentOptimizer(0.1, 0.01), id="proximal_l1"),
    pytest.param(lambda: fg.train.AdafactorOptimizer(beta1=0.9, factored=False), id="adafactor_m"),
    pytest.param(lambda: fg.train.MultistepAdamOptimizer(0.1, n=2), id="multistep_2"),
]


def test_the_suite_covers_every_exported_optimizer() -> None:
    ids = {p.id for p in OPTIMIZERS}
    exported = {
        n
        for n in fg.train.__all__
        if isinstance(getattr(fg.train, n), type)
        and issubclass(getattr(fg.train, n), fg.train.TF1Optimizer)
    }
    assert exported - {"TF1Optimizer"} <= ids
    assert len(exported) >= 22  # tf.train's 10, the TF1 projects' 11, the base


def _loss(params, x):
    """Depends on ``a`` and ``nested`` only: ``b`` gets a ``None`` gradient."""
    h = jnp.tanh(params["a"] * x) + params["nested"]["bias"]
    return jnp.sum((h - 0.5) ** 2) + jnp.sum(params["nested"]["list"][0] ** 2)


def _params(dtype):
    return {
        "a": jnp.array([0.5, -1.0], dtype),
        "b": jnp.array([1.0, 2.0, 3.0], dtype),
        "nested": {"bias": jnp.array([0.1, 0.2], dtype), "list": [jnp.array(0.7, dtype)]},
    }


X = jnp.array([1.0, 2.0])


@pytest.mark.parametrize("make", OPTIMIZERS)
def test_jitted_step_traces_once_over_many_calls(make) -> None:
    opt = make()
    chex.clear_trace_counter()

    @jax.jit
    @chex.assert_max_traces(n=1)
    def step(state, x):
        return opt.minimize(_loss, state, x)

    state = opt.init(_params(jnp.float32))
    losses = []
    for _ in range(5):
        state, loss = step(state, X)
        losses.append(float(loss))
    assert int(state.global_step) == 5
    assert losses[-1] < losses[0]


@pytest.mark.parametrize("make", OPTIMIZERS)
def test_none_gradient_leaves_the_variable_and_its_slots_unchanged(make) -> None:
    opt = make()
    state0 = opt.init(_params(jnp.float32))
    step = jax.jit(lambda s: opt.minimize(_loss, s, X)[0])
    state = step(step(state0))
    np.testing.assert_array_equal(state.params["b"], state0.params["b"])
    assert not np.array_equal(state.params["a"], state0.params["a"])
    # "b" is the only leaf of shape (3,): every such slot must still be its initial value.
    new_and_old = zip(
        jax.tree.leaves(state.opt_state), jax.tree.leaves(state0.opt_state), strict=True
    )
    b_slots = [(n, o) for n, o in new_and_old if jnp.shape(n) == (3,)]
    for new, old in b_slots:
        np.testing.assert_array_equal(new, old)


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.bfloat16], ids=["float32", "bfloat16"])
@pytest.mark.parametrize("make", OPTIMIZERS)
def test_params_and_slots_stay_in_their_dtype(make, dtype) -> None:
    opt = make()
    step = jax.jit(lambda s: opt.minimize(_loss, s, X.astype(dtype))[0])
    state = step(step(opt.init(_params(dtype))))
    for leaf in jax.tree.leaves(state.params):
        assert leaf.dtype == dtype
    slot_shapes = {jnp.shape(p) for p in jax.tree.leaves(state.params)}
    for slot in jax.tree.leaves(state.opt_state):
        if jnp.shape(slot) in slot_shapes - {()}:
            assert slot.dtype == dtype
    chex.assert_tree_all_finite(state.params)


def test_mixed_dtype_params_share_one_learning_rate() -> None:
    opt = fg.train.AdamOptimizer(0.1)
    params = {"a": jnp.array([1.0], jnp.bfloat16), "b": jnp.array([1.0], jnp.float32)}
    state, _ = opt.minimize(lambda p: (p["a"].astype(jnp.float32) + p["b"]).sum(), opt.init(params))
    assert state.params["a"].dtype == jnp.bfloat16
    np.testing.assert_allclose(state.params["b"], [0.9], rtol=1e-6)


@pytest.mark.parametrize("make", OPTIMIZERS)
def test_vmap_over_a_batch_of_states_matches_a_loop(make) -> None:
    opt = make()
    xs = jnp.array([[1.0, 2.0], [-1.0, 0.5]])
    step = jax.jit(lambda s, x: opt.minimize(_loss, s, x))
    states = jax.vmap(lambda x: opt.init(_params(jnp.float32)))(xs)
    batched, losses = jax.jit(jax.vmap(step))(states, xs)
    for i, x in enumerate(xs):
        single, loss = step(opt.init(_params(jnp.float32)), x)
        chex.assert_trees_all_close(
            jax.tree.map(lambda b, i=i: b[i], batched.params), single.params, rtol=1e-6
        )
        np.testing.assert_allclose(losses[i], loss, rtol=1e-6)


@pytest.mark.parametrize("make", OPTIMIZERS)
def test_a_step_closes_over_no_array(make) -> None:
    """A hyperparameter is a NumPy scalar, a literal of the step, never a ``jax.Array``
    the step closes over: JAX 0.10 passes those as extra arguments, and a vmapped scan of
    steps jitted once then called on its own outputs failed with "Execution supplied 39
    arguments but compiled program expected 41" (examples/gradient_reversal.py)."""
    opt = make()
    state = opt.init(_params(jnp.float32))
    for sparse in (False, True):  # the dense and the sparse rules
        ids = np.array([0, 1, 1]) if sparse else None

        def step(state, x, ids=ids):
            read = jnp.sum if ids is None else (lambda a: a[ids].sum())
            return opt.minimize(lambda p: _loss(p, x) + read(p["b"]), state)[0]

        closed = jax.make_jaxpr(step)(state, X)
        assert not [c for c in closed.consts if isinstance(c, jax.Array)], closed.consts


@pytest.mark.parametrize("make", OPTIMIZERS)
def test_tx_chains_with_optax_and_matches_the_optimizer(make) -> None:
    opt = make()
    chained = fg.train.Optimizer(optax.chain(optax.identity(), opt.tx))
    a, b = opt.init(_params(jnp.float32)), chained.init(_params(jnp.float32))
    for _ in range(2):
        a, _ = opt.minimize(_loss, a, X)
        b, _ = chained.minimize(_loss, b, X)
    chex.assert_trees_all_close(a.params, b.params, rtol=1e-6)
