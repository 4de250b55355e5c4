"""The training runs whose checkpoints are kept in ``tests/data/checkpoints``.

Each case builds an ``fg.train`` optimizer (or composition) from the public API alone, so
that the funcgrad that wrote a checkpoint and the one that restores it build the same
thing.  ``write.py`` runs each case's three steps and saves the state; the tests restore
it and take the fourth step.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from typing import NamedTuple

import jax.numpy as jnp
import numpy as np

import funcgrad as fg


class Case(NamedTuple):
    """An optimizer to build, whether a TensorFlow checkpoint holds its state, and
    whether an ``ExponentialMovingAverage`` of the weights goes with it."""

    make: Callable[[], Any]
    tf: bool = True
    ema: bool = False


def params() -> dict[str, Any]:
    """The variables every case trains."""
    return {"W": jnp.array([[0.5, -0.3], [0.2, 0.8], [-0.6, 0.1]]), "b": jnp.array([0.1, -0.2])}


def batch(step: int) -> tuple[Any, Any]:
    """The batch of step ``step``: four examples of three features, two targets."""
    rng = np.random.default_rng(step)
    x = rng.normal(size=(4, 3)).astype(np.float32)
    return jnp.asarray(x), jnp.asarray(rng.normal(size=(4, 2)).astype(np.float32))


def loss(p: Any, x: Any, y: Any) -> Any:
    return jnp.mean((jnp.tanh(x @ p["W"] + p["b"][None, :]) - y) ** 2)


def _has(*names: str) -> bool:
    return all(hasattr(fg.train, n) for n in names)


def cases() -> dict[str, Case]:
    """Every case the running funcgrad has (0.1.0 has the nine TF1 optimizers)."""
    t = fg.train
    found = {
        "sgd": Case(lambda: t.GradientDescentOptimizer(0.1)),
        "momentum": Case(lambda: t.MomentumOptimizer(0.1, 0.9)),
        "nesterov": Case(lambda: t.MomentumOptimizer(0.1, 0.9, use_nesterov=True)),
        "adam": Case(lambda: t.AdamOptimizer(0.1)),
        "adam_schedule": Case(lambda: t.AdamOptimizer(t.exponential_decay(0.1, 2, 0.5))),
        "rmsprop": Case(lambda: t.RMSPropOptimizer(0.1, momentum=0.5)),
        "rmsprop_centered": Case(lambda: t.RMSPropOptimizer(0.1, momentum=0.5, centered=True)),
        "adagrad": Case(lambda: t.AdagradOptimizer(0.1)),
        "adadelta": Case(lambda: t.AdadeltaOptimizer(1.0)),
        "ftrl": Case(lambda: t.FtrlOptimizer(0.1, l1_regularization_strength=0.01)),
        "proximal_sgd": Case(lambda: t.ProximalGradientDescentOptimizer(0.1, 0.01, 0.01)),
        "proximal_adagrad": Case(lambda: t.ProximalAdagradOptimizer(0.1, 0.1, 0.01, 0.01)),
    }
    if not _has("save_tf_checkpoint"):  # 0.1.0: orbax checkpoints of the nine only
        return {k: v._replace(tf=False) for k, v in found.items()}
    found.update(
        {
            "lazy_adam": Case(lambda: t.LazyAdamOptimizer(0.1)),
            "adam_weight_decay": Case(
                lambda: t.AdamWeightDecayOptimizer(
                    0.1, weight_decay_rate=0.01, exclude_from_weight_decay=["b"]
                )
            ),
            "lamb": Case(lambda: t.LAMBOptimizer(0.1, weight_decay_rate=0.01)),
            "adafactor": Case(lambda: t.AdafactorOptimizer(learning_rate=0.1)),
            "adafactor_momentum": Case(
                lambda: t.AdafactorOptimizer(learning_rate=0.1, beta1=0.9, factored=False)
            ),
            "multistep_adam": Case(lambda: t.MultistepAdamOptimizer(0.1, n=2)),
            "adamax": Case(lambda: t.AdaMaxOptimizer(0.1)),
            "nadam": Case(lambda: t.NadamOptimizer(0.1)),
            "lars": Case(lambda: t.LARSOptimizer(0.1, momentum=0.9)),
            "addsign": Case(
                lambda: t.AddSignOptimizer(0.1, sign_decay_fn=t.get_linear_decay_fn(8))
            ),
            "powersign": Case(lambda: t.PowerSignOptimizer(0.1)),
            "adamw": Case(lambda: t.AdamWOptimizer(0.01, 0.1)),
            "momentumw": Case(lambda: t.MomentumWOptimizer(0.01, 0.1, 0.9)),
            "loss_scale": Case(lambda: t.LossScaleOptimizer(t.AdamOptimizer(0.1), initial_scale=8)),
            "moving_average": Case(
                lambda: t.MovingAverageOptimizer(t.MomentumOptimizer(0.1, 0.9), 0.5)
            ),
            "group": Case(
                lambda: t.OptimizerGroup(
                    D=(t.AdamOptimizer(0.1), ["W"]), G=(t.MomentumOptimizer(0.1, 0.9), ["b"])
                )
            ),
            "optimize_loss": Case(
                lambda: t.optimize_loss(0.1, "Adam", clip_gradients=1.0, variables=["W"])
            ),
            "ema": Case(lambda: t.GradientDescentOptimizer(0.1), ema=True),
        }
    )
    return found


def ema() -> Any:
    """The moving average of the ``ema`` case."""
    return fg.train.ExponentialMovingAverage(0.5)


def init(case: Case) -> Any:
    """The state before the first step: a ``TrainState``, with its ``EmaState`` for an
    ``ema`` case."""
    opt = case.make()
    state = opt.init(params())
    return (state, ema().init(state.params)) if case.ema else state


def step(case: Case, opt: Any, state: Any, n: int) -> Any:
    """Step ``n`` (0-based) of ``case`` on ``state``."""
    if case.ema:
        train, averages = state
        train, _ = opt.minimize(loss, train, *batch(n))
        return train, ema().apply(averages, train.params)
    return opt.minimize(loss, state, *batch(n))[0]


#: The steps taken before the checkpoint is written.
STEPS = 3
