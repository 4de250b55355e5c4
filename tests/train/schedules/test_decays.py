"""fg.train schedules: closed forms, staircase and boundary semantics, jit/vmap, bad input."""

import math

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import funcgrad as fg

_STEPS = np.arange(0, 60)


def _closed_exponential(s, lr, d, rate, staircase=False):
    p = np.floor(s / d) if staircase else s / d
    return lr * rate**p


def _closed_polynomial(s, lr, d, end=0.0001, power=1.0, cycle=False):
    if cycle:
        d = d * np.where(s == 0, 1.0, np.ceil(s / d))
    else:
        s = np.minimum(s, d)
    return (lr - end) * (1 - s / d) ** power + end


def _closed_cosine(s, lr, d, alpha=0.0):
    return lr * ((1 - alpha) * 0.5 * (1 + np.cos(np.pi * np.minimum(s, d) / d)) + alpha)


def _closed_linear_cosine(s, lr, d, num_periods=0.5, alpha=0.0, beta=0.001):
    s = np.minimum(s, d)
    cosine = 0.5 * (1 + np.cos(np.pi * 2 * num_periods * s / d))
    return lr * ((alpha + (d - s) / d) * cosine + beta)


def _closed_restarts(s, lr, first, t_mul=2.0, m_mul=1.0, alpha=0.0):
    """SGDR by walking the periods one by one (no logarithms)."""
    out = []
    for step in s:
        start, length, i = 0.0, float(first), 0
        while step >= start + length:
            start, length, i = start + length, length * t_mul, i + 1
        cosine = 0.5 * m_mul**i * (1 + math.cos(math.pi * (step - start) / length))
        out.append(lr * ((1 - alpha) * cosine + alpha))
    return np.array(out)


_CASES = [
    pytest.param(
        fg.train.exponential_decay(0.1, 7, 0.9),
        _closed_exponential(_STEPS, 0.1, 7, 0.9),
        id="exponential",
    ),
    pytest.param(
        fg.train.exponential_decay(0.1, 7, 0.5, staircase=True),
        _closed_exponential(_STEPS, 0.1, 7, 0.5, staircase=True),
        id="exponential_staircase",
    ),
    pytest.param(
        fg.train.natural_exp_decay(0.1, 5, 0.3),
        _closed_exponential(_STEPS, 0.1, 5, math.exp(-0.3)),
        id="natural_exp",
    ),
    pytest.param(
        fg.train.natural_exp_decay(0.1, 5, 0.3, staircase=True),
        _closed_exponential(_STEPS, 0.1, 5, math.exp(-0.3), staircase=True),
        id="natural_exp_staircase",
    ),
    pytest.param(
        fg.train.inverse_time_decay(0.5, 3, 0.7),
        0.5 / (1 + 0.7 * _STEPS / 3),
        id="inverse_time",
    ),
    pytest.param(
        fg.train.inverse_time_decay(0.5, 3, 0.7, staircase=True),
        0.5 / (1 + 0.7 * np.floor(_STEPS / 3)),
        id="inverse_time_staircase",
    ),
    pytest.param(
        fg.train.polynomial_decay(0.1, 40),
        _closed_polynomial(_STEPS, 0.1, 40),
        id="polynomial",
    ),
    pytest.param(
        fg.train.polynomial_decay(0.1, 7, end_learning_rate=0.01, power=2.0, cycle=True),
        _closed_polynomial(_STEPS, 0.1, 7, end=0.01, power=2.0, cycle=True),
        id="polynomial_cycle",
    ),
    pytest.param(
        fg.train.cosine_decay(0.1, 40, alpha=0.2),
        _closed_cosine(_STEPS, 0.1, 40, alpha=0.2),
        id="cosine",
    ),
    pytest.param(
        fg.train.cosine_decay_restarts(0.1, 4, t_mul=2.0, m_mul=0.7, alpha=0.1),
        _closed_restarts(_STEPS, 0.1, 4, t_mul=2.0, m_mul=0.7, alpha=0.1),
        id="cosine_restarts",
    ),
    pytest.param(
        fg.train.cosine_decay_restarts(0.1, 6, t_mul=1.0, m_mul=0.9),
        _closed_restarts(_STEPS, 0.1, 6, t_mul=1.0, m_mul=0.9),
        id="cosine_restarts_fixed_period",
    ),
    pytest.param(
        fg.train.linear_cosine_decay(0.1, 40),
        _closed_linear_cosine(_STEPS, 0.1, 40),
        id="linear_cosine",
    ),
    pytest.param(
        fg.train.linear_cosine_decay(0.1, 25, num_periods=2.0, alpha=0.3, beta=0.05),
        _closed_linear_cosine(_STEPS, 0.1, 25, num_periods=2.0, alpha=0.3, beta=0.05),
        id="linear_cosine_periods",
    ),
    pytest.param(
        fg.train.noisy_linear_cosine_decay(0.1, 40, initial_variance=0.0, key=jax.random.key(0)),
        _closed_linear_cosine(_STEPS, 0.1, 40),
        id="noisy_linear_cosine_without_noise",
    ),
    pytest.param(
        fg.train.piecewise_constant([10, 30], [0.3, 0.2, 0.1]),
        np.select([_STEPS <= 10, _STEPS <= 30], [0.3, 0.2], 0.1),
        id="piecewise_constant",
    ),
]


@pytest.mark.parametrize(("schedule", "expected"), _CASES)
def test_schedule_closed_form_per_step_and_vmapped(schedule, expected) -> None:
    # float32 against float64: a few ulps of the value, or of the learning rate (<= 0.5)
    # where the value is a small difference of numbers of that size.
    tolerance = dict(rtol=2e-6, atol=4 * np.finfo(np.float32).eps * 0.5)
    per_step = [float(schedule(int(s))) for s in _STEPS[::7]]
    np.testing.assert_allclose(per_step, expected[::7], **tolerance)
    vmapped = jax.vmap(schedule)(jnp.asarray(_STEPS))
    assert vmapped.dtype == jnp.float32
    np.testing.assert_allclose(vmapped, expected, **tolerance)


def test_staircase_holds_the_rate_until_a_whole_multiple() -> None:
    schedule = fg.train.exponential_decay(1.0, decay_steps=10, decay_rate=0.5, staircase=True)
    rates = jax.vmap(schedule)(jnp.arange(100))
    np.testing.assert_array_equal(rates, 0.5 ** (np.arange(100) // 10))


def test_piecewise_boundary_step_keeps_the_value_before_it() -> None:
    schedule = fg.train.piecewise_constant([5], [1.0, 0.5])
    assert [float(schedule(s)) for s in (4, 5, 6)] == [1.0, 1.0, 0.5]


def test_cosine_restarts_restart_at_the_geometric_period_starts() -> None:
    schedule = fg.train.cosine_decay_restarts(1.0, first_decay_steps=3, t_mul=2.0, m_mul=0.5)
    peaks = [float(schedule(s)) for s in (0, 3, 9, 21)]  # periods of 3, 6, 12 steps
    np.testing.assert_allclose(peaks, [1.0, 0.5, 0.25, 0.125], rtol=1e-6)


def test_schedule_jits_once_for_a_traced_step() -> None:
    schedule = fg.train.polynomial_decay(0.1, 10, cycle=True)

    @jax.jit
    @chex.assert_max_traces(n=1)
    def rate(step):
        return schedule(step)

    chex.clear_trace_counter()
    got = [float(rate(jnp.int32(s))) for s in range(25)]
    np.testing.assert_allclose(
        got, _closed_polynomial(np.arange(25), 0.1, 10, cycle=True), rtol=2e-6
    )


def test_schedule_accepts_numpy_integers_and_keeps_an_array_learning_rate() -> None:
    schedule = fg.train.exponential_decay(jnp.bfloat16(0.5), 2, 0.5)
    assert schedule(np.int64(2)).dtype == jnp.bfloat16
    assert float(schedule(np.int64(2))) == 0.25


def test_schedule_with_a_traced_learning_rate() -> None:
    got = jax.jit(lambda lr: fg.train.cosine_decay(lr, 10)(5))(jnp.float32(2.0))
    np.testing.assert_allclose(got, 1.0, rtol=1e-6)


@pytest.mark.parametrize(
    "step",
    [
        pytest.param(1.0, id="python_float"),
        pytest.param(jnp.float32(3.0), id="float_array"),
        pytest.param(np.arange(3.0), id="numpy_floats"),
        pytest.param(True, id="bool"),
        pytest.param("3", id="string"),
    ],
)
@pytest.mark.parametrize(
    "schedule",
    [
        pytest.param(fg.train.exponential_decay(0.1, 5, 0.5), id="exponential"),
        pytest.param(fg.train.piecewise_constant([5], [0.1, 0.01]), id="piecewise"),
        pytest.param(fg.train.cosine_decay_restarts(0.1, 5), id="cosine_restarts"),
    ],
)
def test_step_that_is_not_an_integer(schedule, step) -> None:
    with pytest.raises(TypeError, match=r"schedule\(step\) from fg\.train\..*must be an integer"):
        schedule(step)


@pytest.mark.parametrize(
    ("factory", "kwargs", "error", "match"),
    [
        pytest.param(
            "exponential_decay",
            dict(learning_rate=-0.1, decay_steps=5, decay_rate=0.5),
            ValueError,
            "learning_rate must be finite and >= 0",
            id="negative_rate",
        ),
        pytest.param(
            "exponential_decay",
            dict(learning_rate=float("inf"), decay_steps=5, decay_rate=0.5),
            ValueError,
            "learning_rate must be finite",
            id="infinite_rate",
        ),
        pytest.param(
            "exponential_decay",
            dict(learning_rate=0.1, decay_steps=-5, decay_rate=0.5),
            ValueError,
            "decay_steps must be finite and > 0",
            id="negative_decay_steps",
        ),
        pytest.param(
            "exponential_decay",
            dict(learning_rate=0.1, decay_steps=0, decay_rate=0.5),
            ValueError,
            "decay_steps must be finite and > 0",
            id="zero_decay_steps",
        ),
        pytest.param(
            "exponential_decay",
            dict(learning_rate=0.1, decay_steps=5, decay_rate=-1.0),
            ValueError,
            "decay_rate must be finite and >= 0",
            id="negative_decay_rate",
        ),
        pytest.param(
            "exponential_decay",
            dict(learning_rate=jnp.ones(2), decay_steps=5, decay_rate=0.5),
            ValueError,
            "learning_rate must be a scalar",
            id="vector_rate",
        ),
        pytest.param(
            "exponential_decay",
            dict(learning_rate=jnp.int32(1), decay_steps=5, decay_rate=0.5),
            TypeError,
            "learning_rate has dtype int32",
            id="integer_rate",
        ),
        pytest.param(
            "exponential_decay",
            dict(learning_rate=0.1, decay_steps=jnp.int32(5), decay_rate=0.5),
            TypeError,
            "decay_steps must be a number, got Array.*; pass Python numbers",
            id="array_decay_steps",
        ),
        pytest.param(
            "natural_exp_decay",
            dict(learning_rate=0.1, decay_steps=5, decay_rate=-0.1),
            ValueError,
            "decay_rate must be",
            id="natural_exp_negative_rate",
        ),
        pytest.param(
            "inverse_time_decay",
            dict(learning_rate=0.1, decay_steps=5, decay_rate=float("nan")),
            ValueError,
            "decay_rate must be finite",
            id="inverse_time_nan_rate",
        ),
        pytest.param(
            "polynomial_decay",
            dict(learning_rate=0.1, decay_steps=5, power=-1.0),
            ValueError,
            "power must be finite and >= 0",
            id="negative_power",
        ),
        pytest.param(
            "polynomial_decay",
            dict(learning_rate=0.1, decay_steps=5, end_learning_rate=-0.1),
            ValueError,
            "end_learning_rate must be finite and >= 0",
            id="negative_end_rate",
        ),
        pytest.param(
            "cosine_decay",
            dict(learning_rate=0.1, decay_steps=5, alpha=1.5),
            ValueError,
            r"alpha must be finite and in \[0, 1\]",
            id="alpha_above_one",
        ),
        pytest.param(
            "cosine_decay_restarts",
            dict(learning_rate=0.1, first_decay_steps=0),
            ValueError,
            "first_decay_steps must be",
            id="zero_first_decay_steps",
        ),
        pytest.param(
            "cosine_decay_restarts",
            dict(learning_rate=0.1, first_decay_steps=5, t_mul=0.0),
            ValueError,
            "t_mul must be finite and > 0",
            id="zero_t_mul",
        ),
        pytest.param(
            "cosine_decay_restarts",
            dict(learning_rate=0.1, first_decay_steps=5, m_mul=-1.0),
            ValueError,
            "m_mul must be finite and >= 0",
            id="negative_m_mul",
        ),
        pytest.param(
            "linear_cosine_decay",
            dict(learning_rate=0.1, decay_steps=5, num_periods=-1.0),
            ValueError,
            "num_periods must be finite and >= 0",
            id="negative_num_periods",
        ),
        pytest.param(
            "noisy_linear_cosine_decay",
            dict(learning_rate=0.1, decay_steps=5, initial_variance=-1.0, key=jax.random.key(0)),
            ValueError,
            "initial_variance must be finite and >= 0",
            id="negative_variance",
        ),
        pytest.param(
            "noisy_linear_cosine_decay",
            dict(learning_rate=0.1, decay_steps=5, key=0),
            TypeError,
            r"key must be a PRNG key, got 0; pass e.g. key=jax.random.key\(0\)",
            id="int_key",
        ),
        pytest.param(
            "piecewise_constant",
            dict(boundaries=[5, 10], values=[0.1, 0.01]),
            ValueError,
            "one more value than boundaries",
            id="too_few_values",
        ),
        pytest.param(
            "piecewise_constant",
            dict(boundaries=[10, 5], values=[0.1, 0.01, 0.001]),
            ValueError,
            "increasing order",
            id="decreasing_boundaries",
        ),
        pytest.param(
            "piecewise_constant",
            dict(boundaries=[2.5], values=[0.1, 0.01]),
            ValueError,
            "integer steps",
            id="float_boundary",
        ),
        pytest.param(
            "piecewise_constant",
            dict(boundaries=[5], values=[0.1, jnp.bfloat16(0.01)]),
            ValueError,
            "share one dtype",
            id="mixed_value_dtypes",
        ),
        pytest.param(
            "piecewise_constant",
            dict(boundaries=[5], values=[0.1, -0.01]),
            ValueError,
            r"values\[1\] must be finite and >= 0",
            id="negative_value",
        ),
    ],
)
def test_bad_static_arguments(factory, kwargs, error, match) -> None:
    with pytest.raises(error, match=rf"fg\.train\.{factory}\(.*" + match):
        getattr(fg.train, factory)(**kwargs)


def _noise(decay_steps, steps, keys, **kwargs):
    """eps of each (key, step): the rate solved for the noise term, in float64."""
    lr, d = 1.0, decay_steps
    rates = jax.jit(
        jax.vmap(lambda k: fg.train.noisy_linear_cosine_decay(lr, d, key=k, **kwargs)(steps))
    )(keys)
    s = np.minimum(steps, d)
    cosine = 0.5 * (1 + np.cos(np.pi * 2 * kwargs["num_periods"] * s / d))
    return (np.asarray(rates, np.float64) / lr - 0.001) / cosine - (d - s) / d


def test_noisy_linear_cosine_noise_has_tensorflows_variance() -> None:
    """eps ~ N(0, initial_variance / (1 + min(step, decay_steps)) ** variance_decay)."""
    steps = np.array([0, 3, 40, 250, 2000])  # 2000 is past decay_steps: the variance stays
    keys = jax.random.split(jax.random.key(1), 4000)
    eps = _noise(1000, steps, keys, initial_variance=2.0, variance_decay=0.7, num_periods=0.25)
    variance = 2.0 / (1 + np.minimum(steps, 1000)) ** 0.7
    n = len(keys)
    # mean within 5 standard errors, variance within 5 standard deviations of the sample variance
    np.testing.assert_array_less(np.abs(eps.mean(0)), 5 * np.sqrt(variance / n))
    np.testing.assert_array_less(np.abs(eps.var(0) / variance - 1), 5 * np.sqrt(2 / (n - 1)))
    # independent across steps and keys
    correlation = np.corrcoef(eps.T)[np.triu_indices(len(steps), 1)]
    np.testing.assert_array_less(np.abs(correlation), 5 / np.sqrt(n))


def test_noisy_linear_cosine_same_step_same_rate() -> None:
    schedule = jax.jit(fg.train.noisy_linear_cosine_decay(0.1, 100, key=jax.random.key(3)))
    steps = jnp.arange(10)
    rates = schedule(steps)
    np.testing.assert_array_equal(schedule(steps[::-1])[::-1], rates)
    np.testing.assert_allclose(jax.vmap(schedule)(steps), rates, rtol=1e-6)
    assert len(set(np.asarray(rates).tolist())) == 10
    legacy = fg.train.noisy_linear_cosine_decay(0.1, 100, key=jax.random.PRNGKey(3))
    assert jax.eval_shape(legacy, steps) == jax.ShapeDtypeStruct((10,), jnp.float32)
