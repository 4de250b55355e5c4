"""TrainState is a pytree: a whole epoch runs in one lax.scan."""

import jax
import jax.numpy as jnp
import numpy as np

import funcgrad as fg


def test_train_state_carries_through_lax_scan() -> None:
    opt = fg.train.AdamOptimizer(0.05)
    xs = jnp.linspace(-1.0, 1.0, 8).reshape(4, 2)

    def loss(w, x):
        return jnp.sum((w * x - 1.0) ** 2)

    def body(state, x):
        return opt.minimize(loss, state, x)

    final, losses = jax.jit(lambda s: jax.lax.scan(body, s, xs))(opt.init(jnp.zeros(2)))
    state = opt.init(jnp.zeros(2))
    for x in xs:
        state, _ = opt.minimize(loss, state, x)
    assert isinstance(final, fg.train.TrainState) and int(final.global_step) == 4
    np.testing.assert_allclose(final.params, state.params, rtol=1e-6)
    assert losses.shape == (4,)
