"""SimCLR's own LARS optimizer, written on fg.train.TF1Optimizer as its TF1 original is written.

SimCLR (google-research/simclr) brought its own ``LARSOptimizer(tf.train.Optimizer)``
(``lars_optimizer.py``): momentum, classic or not, with a layer-wise trust ratio, weight
decay added to the gradient, regex exclusions, one ``<var>/Momentum`` variable per
variable, and ``global_step`` incremented in its own ``apply_gradients``.  The class
below reads line for line like it; ``learning_rate_schedule`` is SimCLR's warmup into a
cosine decay (``model_util.py``).  The run trains a small classifier on scikit-learn's
digits at SimCLR's settings (weight decay 1e-6, bias and ``head_supervised`` excluded)
and prints the loss, the test accuracy and the TF names of the optimizer's state, which
``fg.train.save_tf_checkpoint`` writes and SimCLR's TF1 graph restores.

    python examples/simclr_lars.py
    python examples/simclr_lars.py --classic-momentum false --plot lars.png
"""

from __future__ import annotations

import argparse
import math
import re
from collections.abc import Callable
from collections.abc import Sequence
from typing import Any
from typing import ClassVar

import datasets
import jax
import jax.numpy as jnp
import numpy as np
import optax
import reporting

import funcgrad as fg

#: A learning rate as a function of ``global_step``.
Schedule = Callable[[jax.Array], jax.Array]

# --- lars_optimizer.py (google-research/simclr, commit 383d4143fd8cf7879ae10f1046a9baeb753ff438)

EETA_DEFAULT = 0.001


class LARSOptimizer(fg.train.TF1Optimizer):
    """Layer-wise Adaptive Rate Scaling for large batch training.

    Introduced by "Large Batch Training of Convolutional Networks" by Y. You,
    I. Gitman, and B. Ginsburg. (https://arxiv.org/abs/1708.03888)
    """

    # tf.get_variable(name=param_name + "/Momentum", ...): the slot "Momentum" of each
    # variable, saved as <var>/Momentum.
    slots: ClassVar[dict[str, str]] = {"Momentum": "Momentum"}

    def __init__(
        self,
        learning_rate: float | Schedule,
        momentum: float = 0.9,
        use_nesterov: bool = False,
        weight_decay: float = 0.0,
        exclude_from_weight_decay: list[str] | None = None,
        exclude_from_layer_adaptation: list[str] | None = None,
        classic_momentum: bool = True,
        eeta: float = EETA_DEFAULT,
    ) -> None:
        """Constructs a LARSOptimizer.

        Args:
          learning_rate: A `float` for learning rate (or a schedule of the global step).
          momentum: A `float` for momentum.
          use_nesterov: A 'Boolean' for whether to use nesterov momentum.
          weight_decay: A `float` for weight decay.
          exclude_from_weight_decay: A list of `string` for variable screening, if
              any of the string appears in a variable's name, the variable will be
              excluded for computing weight decay. For example, one could specify
              the list like ['batch_normalization', 'bias'] to exclude BN and bias
              from weight decay.
          exclude_from_layer_adaptation: Similar to exclude_from_weight_decay, but
              for layer adaptation. If it is None, it will be defaulted the same as
              exclude_from_weight_decay.
          classic_momentum: A `boolean` for whether to use classic (or popular)
              momentum. The learning rate is applied during momeuntum update in
              classic momentum, but after momentum for popular momentum.
          eeta: A `float` for scaling of learning rate when computing trust ratio.
        """
        super().__init__(learning_rate)

        self.momentum = momentum
        self.weight_decay = weight_decay
        self.use_nesterov = use_nesterov
        self.classic_momentum = classic_momentum
        self.eeta = eeta
        self.exclude_from_weight_decay = exclude_from_weight_decay
        # exclude_from_layer_adaptation is set to exclude_from_weight_decay if the
        # arg is None.
        if exclude_from_layer_adaptation:
            self.exclude_from_layer_adaptation = exclude_from_layer_adaptation
        else:
            self.exclude_from_layer_adaptation = exclude_from_weight_decay

    # The original's apply_gradients loops over (grad, param); its body is _apply_dense.
    # assign() becomes returning the new values; apply_gradients increments global_step.
    def _apply_dense(
        self, grad: jax.Array, param: jax.Array, slots: dict[str, jax.Array], step: fg.train.TF1Step
    ) -> tuple[jax.Array, dict[str, jax.Array]]:
        param_name = step.name

        v = slots["Momentum"]

        if self._use_weight_decay(param_name):
            grad += self.weight_decay * param

        if self.classic_momentum:
            trust_ratio = 1.0
            if self._do_layer_adaptation(param_name):
                w_norm = jnp.linalg.norm(param.ravel(), ord=2)  # tf.norm: the whole tensor
                g_norm = jnp.linalg.norm(grad.ravel(), ord=2)
                trust_ratio = jnp.where(
                    jnp.greater(w_norm, 0),
                    jnp.where(jnp.greater(g_norm, 0), (self.eeta * w_norm / g_norm), 1.0),
                    1.0,
                )
            scaled_lr = step.learning_rate * trust_ratio

            next_v = jnp.multiply(self.momentum, v) + scaled_lr * grad
            if self.use_nesterov:
                update = jnp.multiply(self.momentum, next_v) + scaled_lr * grad
            else:
                update = next_v
            next_param = param - update
        else:
            next_v = jnp.multiply(self.momentum, v) + grad
            if self.use_nesterov:  # noqa: SIM108 (the original's lines)
                update = jnp.multiply(self.momentum, next_v) + grad
            else:
                update = next_v

            trust_ratio = 1.0
            if self._do_layer_adaptation(param_name):
                w_norm = jnp.linalg.norm(param.ravel(), ord=2)
                v_norm = jnp.linalg.norm(update.ravel(), ord=2)
                trust_ratio = jnp.where(
                    jnp.greater(w_norm, 0),
                    jnp.where(jnp.greater(v_norm, 0), (self.eeta * w_norm / v_norm), 1.0),
                    1.0,
                )
            scaled_lr = trust_ratio * step.learning_rate
            next_param = param - scaled_lr * update

        return next_param, {"Momentum": next_v}

    def _use_weight_decay(self, param_name: str) -> bool:
        """Whether to use L2 weight decay for `param_name`."""
        if not self.weight_decay:
            return False
        if self.exclude_from_weight_decay:
            for r in self.exclude_from_weight_decay:
                if re.search(r, param_name) is not None:
                    return False
        return True

    def _do_layer_adaptation(self, param_name: str) -> bool:
        """Whether to do layer-wise learning rate adaptation for `param_name`."""
        if self.exclude_from_layer_adaptation:
            for r in self.exclude_from_layer_adaptation:
                if re.search(r, param_name) is not None:
                    return False
        return True


# --- model_util.py's learning_rate_schedule, with its FLAGS as arguments ---------------------


def learning_rate_schedule(
    base_learning_rate: float,
    train_batch_size: int,
    warmup_steps: int,
    total_steps: int,
    learning_rate_scaling: str = "linear",
) -> Schedule:
    """SimCLR's rate: a linear warmup to the scaled rate, then a cosine decay to zero."""
    if learning_rate_scaling == "linear":
        scaled_lr = base_learning_rate * train_batch_size / 256.0
    elif learning_rate_scaling == "sqrt":
        scaled_lr = base_learning_rate * math.sqrt(train_batch_size)
    else:
        raise ValueError(f"Unknown learning rate scaling {learning_rate_scaling}")
    cosine_decay = fg.train.cosine_decay(scaled_lr, total_steps - warmup_steps)

    def schedule(global_step: jax.Array) -> jax.Array:
        learning_rate = (
            global_step.astype(jnp.float32) / int(warmup_steps) * scaled_lr
            if warmup_steps
            else jnp.float32(scaled_lr)
        )
        # Cosine decay learning rate schedule
        return jnp.where(
            global_step < warmup_steps, learning_rate, cosine_decay(global_step - warmup_steps)
        )

    return schedule


# --- A small run: a classifier on the digits, at SimCLR's settings ---------------------------

Params = dict[str, dict[str, jax.Array]]


def init(key: jax.Array, hidden: int) -> Params:
    """A hidden layer and SimCLR's supervised head, named as TF1 scopes would name them."""
    k1, k2 = jax.random.split(key)
    return {
        "base_model": {
            "dense": {
                "kernel": jax.random.normal(k1, (64, hidden)) / 8.0,
                "bias": jnp.zeros(hidden),
            }
        },
        "head_supervised": {
            "dense": {
                "kernel": jax.random.normal(k2, (hidden, 10)) / np.sqrt(hidden),
                "bias": jnp.zeros(10),
            }
        },
    }


def logits(params: Params, x: jax.Array) -> jax.Array:
    base, head = params["base_model"]["dense"], params["head_supervised"]["dense"]
    h = jax.nn.relu(x @ base["kernel"] + base["bias"][None, :])
    return h @ head["kernel"] + head["bias"][None, :]


def loss_fn(params: Params, x: jax.Array, y: jax.Array) -> jax.Array:
    return optax.softmax_cross_entropy_with_integer_labels(logits(params, x), y).mean()


def train(
    steps: int = 200,
    batch: int = 512,
    learning_rate: float = 0.3,
    warmup_steps: int = 20,
    classic_momentum: bool = True,
    seed: int = 0,
    curves: reporting.Curves | None = None,
) -> tuple[list[float], float, fg.train.TrainState, LARSOptimizer]:
    """Trains with SimCLR's LARS and rate; returns the losses, the test accuracy, the
    final state and the optimizer.

    ``curves`` gets each step's loss, gradient norm and learning rate.
    """
    data = datasets.load_digits(seed=seed)
    schedule = learning_rate_schedule(learning_rate, batch, warmup_steps, steps)
    opt = LARSOptimizer(
        schedule,
        momentum=0.9,
        weight_decay=1e-6,
        exclude_from_weight_decay=["batch_normalization", "bias", "head_supervised"],
        classic_momentum=classic_momentum,
    )
    key, init_key = jax.random.split(jax.random.key(seed))
    state = opt.init(init(init_key, 64))
    x_all, y_all = jnp.asarray(data.x_train), jnp.asarray(data.y_train)

    @jax.jit
    def step(state: fg.train.TrainState, key: jax.Array) -> tuple[Any, jax.Array, jax.Array]:
        idx = jax.random.choice(key, len(x_all), (batch,), replace=len(x_all) < batch)
        loss = loss_fn(state.params, x_all[idx], y_all[idx])
        gvs = opt.compute_gradients(loss_fn, state.params, x_all[idx], y_all[idx])
        norm = fg.global_norm([g for g, _ in gvs])
        return opt.apply_gradients(gvs, state), loss, norm

    losses = []
    for t, k in enumerate(reporting.progress(jax.random.split(key, steps), desc="LARS"), start=1):
        rate = schedule(state.global_step)
        state, loss, norm = step(state, k)
        losses.append(float(loss))
        if curves is not None:
            curves.add("loss", "LARS", [t], [losses[-1]])
            curves.add("gradient norm", "LARS", [t], [norm])
            curves.add("learning rate", "LARS", [t], [rate])
    predictions = jnp.argmax(jax.jit(logits)(state.params, jnp.asarray(data.x_test)), axis=-1)
    return losses, float((predictions == data.y_test).mean()), state, opt


def tf_names(state: fg.train.TrainState, opt: LARSOptimizer) -> list[str]:
    """The TF names of ``opt``'s slots in ``state``, as SimCLR's graph names its variables."""
    per_variable, _ = opt.tf_names(state.params)
    names = fg.train.variable_names(state.params)
    return [f"{n}/{tf}" for n, slots in zip(names, per_variable, strict=True) for _, tf in slots]


def build_parser() -> argparse.ArgumentParser:
    """The command line."""
    parser = reporting.make_parser(__doc__)
    parser.add_argument("--steps", type=int, default=200, help="training steps")
    parser.add_argument("--batch", type=int, default=512, help="examples per step")
    parser.add_argument(
        "--learning-rate", type=float, default=0.3, help="base rate, scaled by batch / 256"
    )
    parser.add_argument("--warmup-steps", type=int, default=20, help="linear warmup steps")
    parser.add_argument(
        "--classic-momentum",
        choices=["true", "false"],
        default="true",
        help="the rate inside the momentum (true) or after it (false)",
    )
    parser.add_argument("--seed", type=int, default=0, help="random seed")
    reporting.add_output_arguments(parser, "each step's loss, gradient norm and learning rate")
    return parser


def main(argv: Sequence[str] | None = None) -> tuple[list[float], float]:
    """Trains and prints the first and last loss, the test accuracy and the TF names."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if min(args.steps, args.batch) < 1 or args.learning_rate <= 0:
        parser.error("--steps, --batch and --learning-rate must be positive")
    if not 0 <= args.warmup_steps < args.steps:
        parser.error("--warmup-steps must be at least 0 and fewer than --steps")
    reporting.check_output_arguments(parser, args)
    curves = reporting.Curves(args, "SimCLR's LARS on digits")
    classic = args.classic_momentum == "true"
    print(
        f"SimCLR's LARS ({'classic' if classic else 'popular'} momentum 0.9, weight decay "
        f"1e-6, eeta {EETA_DEFAULT}), {args.steps} steps of {args.batch}, rate "
        f"{args.learning_rate} x {args.batch}/256 after {args.warmup_steps} warmup steps"
    )
    losses, accuracy, state, opt = train(
        args.steps, args.batch, args.learning_rate, args.warmup_steps, classic, args.seed, curves
    )
    print(f"loss: first step {losses[0]:.3f}, last step {losses[-1]:.3f}")
    print(f"test accuracy: {accuracy:.3f}")
    print("TF names of the optimizer's state:", ", ".join(tf_names(state, opt)))
    curves.close()
    return losses, accuracy


if __name__ == "__main__":
    main()
