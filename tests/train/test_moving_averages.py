"""fg.train.ExponentialMovingAverage: TensorFlow's formulas, low precision, jit/vmap, bad input.

TensorFlow's own numbers are compared in tests/parity/test_moving_averages_parity.py.
"""

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import funcgrad as fg

_rng = np.random.default_rng(0)
VALUES = _rng.normal(size=(6, 3)).astype(np.float32)  # the parameter after each of 6 steps


def _reference(decay, values, start, num_updates=False, zero_debias=False):
    """TensorFlow's recurrence in float64: shadow -= (1 - decay) * (shadow - value)."""
    average = biased = np.asarray(start, np.float64)
    out = []
    for n, value in enumerate(values, start=1):
        d = min(decay, (1 + n) / (10 + n)) if num_updates else decay
        if zero_debias:
            biased = biased - (1 - d) * (biased - value)
            average = biased / (1 - d**n)
        else:
            average = average - (1 - d) * (average - value)
        out.append(average)
    return np.array(out)


@pytest.mark.parametrize("num_updates", [False, True])
@pytest.mark.parametrize("zero_debias", [False, True])
def test_matches_the_recurrence(variant, num_updates: bool, zero_debias: bool) -> None:
    ema = fg.train.ExponentialMovingAverage(0.9, num_updates=num_updates, zero_debias=zero_debias)
    start = np.zeros(3, np.float32) if zero_debias else VALUES[0] + 1
    state = ema.init({"w": jnp.asarray(VALUES[0] + 1)})
    apply = variant(ema.apply)
    got = []
    for n, value in enumerate(VALUES, start=1):
        step = jnp.int32(n) if num_updates else None
        state = apply(state, {"w": jnp.asarray(value)}, step)
        got.append(state.average["w"])
    want = _reference(0.9, VALUES, start, num_updates, zero_debias)
    np.testing.assert_allclose(np.array(got), want, rtol=2e-6, atol=1e-7)
    if zero_debias:
        assert int(state.local_step) == len(VALUES)


def test_zero_debias_of_a_constant_is_the_constant() -> None:
    ema = fg.train.ExponentialMovingAverage(0.999, zero_debias=True)
    state = ema.init(jnp.zeros(2))
    for _ in range(5):
        state = ema.apply(state, jnp.array([3.0, -7.0]))
        np.testing.assert_allclose(state.average, [3.0, -7.0], rtol=1e-5)


def test_bfloat16_one_minus_decay_is_not_rounded_away() -> None:
    """1 - decay is computed in float32, then rounded to bfloat16 (0.000999..., not 0)."""
    ema = fg.train.ExponentialMovingAverage(0.999)
    state = ema.apply(ema.init(jnp.zeros(2, jnp.bfloat16)), jnp.full(2, 1000.0, jnp.bfloat16))
    assert state.average.dtype == jnp.bfloat16
    np.testing.assert_allclose(state.average.astype(np.float32), 1000 * 0.001, rtol=1e-2)
    debiased = fg.train.ExponentialMovingAverage(0.999, zero_debias=True)
    state = debiased.init(jnp.zeros(2, jnp.bfloat16))
    for _ in range(300):  # past 256, where a count kept in bfloat16 (as TensorFlow's) stops
        state = debiased.apply(state, jnp.full(2, 5.0, jnp.bfloat16))
    assert int(state.local_step) == 300
    kept = 1 - np.float32(jnp.bfloat16(1 - np.float32(0.999)))  # 1 - (1 - decay), in float32
    want = state.biased.astype(np.float32) / (1 - kept**300)  # TensorFlow's: 1 - 1**n = 0
    np.testing.assert_allclose(state.average.astype(np.float32), want, rtol=8e-3)


def test_float16_and_a_decay_next_to_one() -> None:
    ema = fg.train.ExponentialMovingAverage(float(np.nextafter(np.float32(1), np.float32(0))))
    state = ema.apply(ema.init(jnp.zeros(1, jnp.float16)), jnp.full(1, 1.0, jnp.float16))
    assert float(state.average[0]) > 0  # 1 - decay = 2**-24 survives in float16


def test_with_training_under_jit_and_vmap() -> None:
    """The cifar10 pattern: minimize, then apply with the global step after it."""
    opt = fg.train.GradientDescentOptimizer(0.1)
    ema = fg.train.ExponentialMovingAverage(0.99, num_updates=True)

    @jax.jit
    def step(state, ema_state):
        state, _ = opt.minimize(lambda w: jnp.sum((w - 1.0) ** 2), state)
        return state, ema.apply(ema_state, state.params, step=state.global_step)

    state = opt.init(jnp.zeros(3))
    ema_state = ema.init(state.params)
    for _ in range(4):
        state, ema_state = step(state, ema_state)
    assert step._cache_size() == 1
    assert bool(jnp.all(ema_state.average < state.params))
    batched = jax.vmap(lambda w, s: ema.apply(ema.init(w * 0), w, s))(
        jnp.ones((4, 3)), jnp.arange(4)
    )
    for i in range(4):
        one = ema.apply(ema.init(jnp.zeros(3)), jnp.ones(3), jnp.int32(i))
        chex.assert_trees_all_close(batched.average[i], one.average)


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        pytest.param({"decay": 1.0}, ValueError, r"in \[0, 1\).*got 1.0", id="one"),
        pytest.param({"decay": -0.1}, ValueError, r"in \[0, 1\)", id="negative"),
        pytest.param({"decay": float("nan")}, ValueError, r"in \[0, 1\)", id="nan"),
        pytest.param({"decay": 0.999999999}, ValueError, "below 1 in float32", id="rounds_to_one"),
        pytest.param({"decay": "0.9"}, TypeError, "decay must be a Python number", id="string"),
        pytest.param(
            {"decay": 0.9, "num_updates": jnp.int32(3)},
            TypeError,
            r"must be True or False; pass the step to apply\(ema_state, params, step=",
            id="num_updates_a_step",
        ),
    ],
)
def test_bad_arguments(kwargs, error, match) -> None:
    with pytest.raises(error, match=match):
        fg.train.ExponentialMovingAverage(**kwargs)


def test_bad_params_and_steps() -> None:
    ema = fg.train.ExponentialMovingAverage(0.9)
    counted = fg.train.ExponentialMovingAverage(0.9, num_updates=True)
    params = {"w": jnp.zeros(2)}
    with pytest.raises(TypeError, match=r"params\['n'\] is int32.*only the floating"):
        ema.init({"n": jnp.int32(1), "w": jnp.zeros(2)})
    with pytest.raises(ValueError, match="num_updates=True needs the step; pass the global step"):
        counted.apply(counted.init(params), params)
    with pytest.raises(ValueError, match=r"step=3 is given but .* num_updates=False"):
        ema.apply(ema.init(params), params, 3)
    with pytest.raises(TypeError, match="step must be an integer"):
        counted.apply(counted.init(params), params, 3.0)
    with pytest.raises(TypeError, match="the EMA state first, then the params"):
        ema.apply(params, ema.init(params))
    with pytest.raises(TypeError, match=r"not the EmaState of this average \(zero_debias=True\)"):
        fg.train.ExponentialMovingAverage(0.9, zero_debias=True).apply(ema.init(params), params)
    with pytest.raises(ValueError, match=r"has structure .* the averages"):
        ema.apply(ema.init(params), {"v": jnp.zeros(2)})
    with pytest.raises(
        ValueError, match=r"params\['w'\] is bfloat16\[2\], its average float32\[2\]"
    ):
        ema.apply(ema.init(params), {"w": jnp.zeros(2, jnp.bfloat16)})


def test_a_decay_schedule_reads_the_step_passed() -> None:
    ema = fg.train.ExponentialMovingAverage(lambda step: jnp.where(step < 3, 0.5, 0.9))
    state = ema.init(jnp.zeros(2))
    apply = jax.jit(ema.apply)
    for step in range(1, 5):
        state = apply(state, jnp.full(2, 10.0), step=jnp.int32(step))
    # float64 reference: decays 0.5, 0.5 (steps 1, 2), then 0.9, 0.9.
    want = _reference(0.9, [10.0] * 2, _reference(0.5, [10.0] * 2, 0.0)[-1])[-1]
    np.testing.assert_allclose(state.average, [want, want], rtol=1e-6)


@pytest.mark.parametrize(
    ("decay", "step", "error", "match"),
    [
        pytest.param(
            lambda s: jnp.ones(2), 1, TypeError, r"decay\(step\) returns .* not one", id="vector"
        ),
        pytest.param(
            lambda s, t: s, 1, TypeError, "decay is a function that fails as schedule", id="arity"
        ),
        pytest.param(
            lambda s: 0.9, None, ValueError, "a decay schedule needs the step; pass", id="no_step"
        ),
    ],
)
def test_bad_decay_schedules(decay, step, error, match) -> None:
    with pytest.raises(error, match=match):
        ema = fg.train.ExponentialMovingAverage(decay)
        ema.apply(ema.init(jnp.zeros(1)), jnp.ones(1), step=step)


@pytest.mark.parametrize(
    "step",
    [
        pytest.param(np.int64(2**40), id="int64_2**40"),
        pytest.param(2**31, id="python_2**31"),
        pytest.param(np.uint64(2**63), id="uint64_2**63"),
        pytest.param(np.array(2**62), id="numpy_array_2**62"),
    ],
)
def test_a_step_beyond_int32_is_not_wrapped(step) -> None:
    """TensorFlow casts num_updates to float32; a wrap to int32 would give step 0 (or an
    OverflowError) and a decay of (1 + 0) / (10 + 0)."""
    ema = fg.train.ExponentialMovingAverage(0.5, num_updates=True)
    state = ema.apply(ema.init(jnp.float32(0.0)), jnp.float32(10.0), step=step)
    expected = _reference(0.5, [10.0], 0.0, num_updates=False)[0]  # (1+s)/(10+s) > 0.5
    np.testing.assert_allclose(state.average, expected, rtol=1e-6)


def test_a_decay_schedule_refuses_a_step_beyond_int32() -> None:
    ema = fg.train.ExponentialMovingAverage(lambda step: jnp.where(step < 3, 0.5, 0.9))
    with pytest.raises(ValueError, match=r"step is 2147483648, beyond the int32 .* below 2\*\*31"):
        ema.apply(ema.init(jnp.zeros(1)), jnp.ones(1), step=2**31)
