"""Every ``fg.train`` optimizer and wrapper survives a donated step.

``jax.jit(step, donate_argnums=0)`` deletes the buffers of the state it is given, so a
state must be new arrays: none of them the optimizer's own constants (a later ``init``
would return deleted arrays, and a later trace would capture them), the parameters
given to ``init`` (an average of the weights), or another leaf of the same state (XLA
refuses to donate one buffer twice).  Each case donates a few steps, then the SAME
optimizer object inits again, steps eagerly and is jitted anew; all follow a fresh
optimizer's trajectory.

The optimizer classes and the transformations of ``fg.train`` are enumerated from
``fg.train.__all__``, so a new one is tested here as soon as it is exported; one with a
required argument this module does not know asks for it in ``_ARGUMENTS``.
"""

import inspect
import typing
from collections.abc import Callable
from typing import Any

import chex
import jax
import jax.numpy as jnp
import optax
import pytest

import funcgrad as fg

#: A value for each required argument of an ``fg.train`` optimizer or transformation.
_ARGUMENTS: dict[str, Callable[[], Any]] = {
    "learning_rate": lambda: 0.1,
    "weight_decay": lambda: 0.01,
    "momentum": lambda: 0.9,
    "every_k": lambda: 2,
    "tx": lambda: fg.train.AdamOptimizer(0.1).tx,
    "opt": lambda: fg.train.AdamOptimizer(0.1),
}

IDS = jnp.array([2, 0, 2])
Y = jnp.array([1.0, -1.0, 0.5])
STEPS = 3

#: ``(init(params) -> state, step(state, ids, y) -> state)``.
Case = tuple[Callable[[Any], Any], Callable[..., Any]]


def _params() -> dict[str, jax.Array]:
    """New parameters: an embedding table (an ``IndexedSlices`` gradient, the sparse
    rules), a vector and a scalar."""
    return {
        "E": jnp.arange(12.0).reshape(4, 3) / 10,
        "w": jnp.array([0.5, -0.3, 0.2]),
        "b": jnp.array(0.1, jnp.float32),
    }


def _loss(params: dict[str, jax.Array], ids: jax.Array, y: jax.Array) -> jax.Array:
    return jnp.mean((params["E"][ids] @ params["w"] + params["b"] - y) ** 2)


def _built(make: Callable[..., Any]) -> Any:
    """``make`` called with a value from ``_ARGUMENTS`` for each required argument."""
    required = [
        name
        for name, p in inspect.signature(make).parameters.items()
        if p.default is p.empty and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
    ]
    unknown = [name for name in required if name not in _ARGUMENTS]
    if unknown:
        pytest.fail(f"{make.__name__} requires {unknown}: add a value for each to _ARGUMENTS")
    return make(**{name: _ARGUMENTS[name]() for name in required})


def _minimizing(opt: fg.train.Optimizer) -> Case:
    return opt.init, lambda state, ids, y: opt.minimize(_loss, state, ids, y)[0]


def _returns_a_transformation(obj: Any) -> bool:
    try:
        returned = typing.get_type_hints(obj).get("return")
    except (NameError, TypeError):
        return False
    return isinstance(returned, type) and issubclass(returned, optax.GradientTransformation)


def _exported() -> dict[str, Callable[[], Case]]:
    """A case for every optimizer class and every transformation ``fg.train`` exports."""
    cases = {}
    for name in fg.train.__all__:
        obj = getattr(fg.train, name)
        if obj is fg.train.TF1Optimizer:  # a base to subclass: no rule of its own
            continue
        if isinstance(obj, type) and issubclass(obj, fg.train.Optimizer):
            cases[name] = lambda obj=obj: _minimizing(_built(obj))
        elif not isinstance(obj, type) and _returns_a_transformation(obj):
            cases[name] = lambda obj=obj: _minimizing(fg.train.Optimizer(_built(obj)))
    return cases


def _group() -> Case:
    group = fg.train.OptimizerGroup(
        D=(fg.train.AdamOptimizer(0.1), ["E", "w"]),
        G=(fg.train.MomentumOptimizer(0.1, 0.9), ["b"]),
    )

    def step(state: Any, ids: jax.Array, y: jax.Array) -> Any:
        state, _ = group["D"].minimize(_loss, state, ids, y)
        return group["G"].minimize(_loss, state, ids, y)[0]

    return group.init, step


def _averaged(**options: Any) -> Callable[[], Case]:
    """Adam with an ``ExponentialMovingAverage`` of its parameters, in one state."""

    def case() -> Case:
        opt, ema = fg.train.AdamOptimizer(0.1), fg.train.ExponentialMovingAverage(0.9, **options)

        def step(state: Any, ids: jax.Array, y: jax.Array) -> Any:
            train, _ = opt.minimize(_loss, state[0], ids, y)
            step = {"step": train.global_step} if options.get("num_updates") else {}
            return train, ema.apply(state[1], train.params, **step)

        return lambda params: (opt.init(params), ema.init(params)), step

    return case


CASES: dict[str, Callable[[], Case]] = {
    **_exported(),
    "AdamOptimizer_array_rate": lambda: _minimizing(fg.train.AdamOptimizer(jnp.float32(0.1))),
    "AdamOptimizer_schedule": lambda: _minimizing(
        fg.train.AdamOptimizer(fg.train.exponential_decay(0.1, 2, 0.5))
    ),
    "LossScaleOptimizer_of_LazyAdam": lambda: _minimizing(
        fg.train.LossScaleOptimizer(fg.train.LazyAdamOptimizer(0.1))
    ),
    "accumulate_skip_nonfinite": lambda: _minimizing(
        fg.train.Optimizer(
            fg.train.accumulate_gradients(
                fg.train.skip_nonfinite(fg.train.LazyAdamOptimizer(0.1).tx), 2
            )
        )
    ),
    "optax_sgd": lambda: _minimizing(fg.train.Optimizer(optax.sgd(0.1, momentum=0.9))),
    "optax_inject_hyperparams": lambda: _minimizing(
        fg.train.Optimizer(optax.inject_hyperparams(optax.sgd)(learning_rate=0.1, momentum=0.9))
    ),
    "OptimizerGroup": _group,
    "ExponentialMovingAverage": _averaged(),
    "ExponentialMovingAverage_zero_debias": _averaged(zero_debias=True),
    "ExponentialMovingAverage_num_updates": _averaged(num_updates=True),
}


def _run(step: Callable[..., Any], state: Any) -> Any:
    for _ in range(STEPS):
        state = step(state, IDS, Y)
    return state


def _close(actual: Any, expected: Any) -> None:
    # One computation, eager or compiled: float32 rounding apart.
    chex.assert_trees_all_close(actual, expected, rtol=1e-5, atol=1e-6)


def test_every_optimizer_class_of_fg_train_is_a_case() -> None:
    classes = [n for n in fg.train.__all__ if n.endswith("Optimizer") and n in CASES]
    assert {"AdamOptimizer", "LazyAdamOptimizer", "LossScaleOptimizer", "Optimizer"} <= set(classes)
    assert len(classes) >= 12  # the ten TF1 optimizers, Optimizer and LossScaleOptimizer
    assert {"accumulate_gradients", "skip_nonfinite", "scale_by_tf_adam"} <= set(CASES)


@pytest.mark.parametrize("case", CASES)
def test_a_donated_step_leaves_the_optimizer_whole(case: str) -> None:
    init, step = CASES[case]()
    fresh_init, fresh_step = CASES[case]()
    expected = _run(fresh_step, fresh_init(_params()))

    chex.clear_trace_counter()
    donated = jax.jit(chex.assert_max_traces(step, n=1), donate_argnums=0)
    _close(_run(donated, init(_params())), expected)
    # The same optimizer object afterwards: a new state, eager steps, a new trace.
    _close(_run(step, init(_params())), expected)
    rejitted = jax.jit(lambda state, ids, y: step(state, ids, y), donate_argnums=0)
    _close(_run(rejitted, init(_params())), expected)


def _own_leaves(state: Any) -> list[tuple[str, jax.Array]]:
    """The arrays of ``state`` other than the parameters a ``TrainState`` holds."""
    without_params = jax.tree.map(
        lambda s: s._replace(params=None) if isinstance(s, fg.train.TrainState) else s,
        state,
        is_leaf=lambda s: isinstance(s, fg.train.TrainState),
    )
    return [
        (jax.tree_util.keystr(path), leaf)
        for path, leaf in jax.tree_util.tree_flatten_with_path(without_params)[0]
        if isinstance(leaf, jax.Array)
    ]


@pytest.mark.parametrize("case", CASES)
def test_init_shares_no_buffer(case: str) -> None:
    """What a donation would delete: a buffer also held by the parameters, by another
    leaf of the state, or by the next ``init``'s state (the optimizer's own)."""
    init, _ = CASES[case]()
    params = _params()
    first, second = _own_leaves(init(params)), _own_leaves(init(params))
    taken = {leaf.unsafe_buffer_pointer() for leaf in jax.tree.leaves(params)}
    taken |= {leaf.unsafe_buffer_pointer() for _, leaf in second}
    shared = []
    for path, leaf in first:
        pointer = leaf.unsafe_buffer_pointer()
        shared += [path] if pointer in taken else []
        taken.add(pointer)
    assert not shared, f"{case}: init's state shares the buffers of {shared}"


def test_a_learning_rate_set_as_an_array_survives_a_donated_state() -> None:
    init, step = _minimizing(fg.train.AdamOptimizer(0.1))
    rate = jnp.float32(0.05)
    state = fg.train.set_learning_rate(init(_params()), rate)
    jax.jit(step, donate_argnums=0)(state, IDS, Y)
    assert not rate.is_deleted()
