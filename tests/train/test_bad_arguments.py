"""Every ``fg.train`` optimizer, from ``fg.train.__all__``: each documented argument's bad
value gets the same clear error from every optimizer, naming the argument and the fix —
never a NaN, a hang or an error from deep inside — and Python-float parameters train.

The bad values of a ``TF1Optimizer``'s arguments come from the annotations its
``__init__`` declares (the range of a number, a flag, a schedule), so an optimizer added
to ``fg.train`` is covered as it is written; the wrappers' and the group's are listed.
"""

from __future__ import annotations

import collections.abc
import inspect
import re
import typing

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import funcgrad as fg

#: What each rule's bad numbers are, and how the message says the rule.
BAD = {
    ">= 0": [-1.0],
    "> 0": [0.0, -1.0],
    "<= 0": [1.0],
    ">= 1": [0],
    "in [0, 1)": [1.0, -0.5],
    "in [0, 1]": [1.5],
    "finite": [],
}
#: Arguments a constructor needs, with a good value.
REQUIRED = {"learning_rate": 0.1, "momentum": 0.9, "weight_decay": 0.01}


def _hints(cls):
    """The annotations of the ``__init__`` arguments of ``cls`` and of its bases."""
    hints = {}
    for c in reversed(cls.__mro__[:-1]):
        if "__init__" in vars(c):
            hints.update(typing.get_type_hints(c.__init__, include_extras=True))
    return hints


def _kinds(hint):
    """The range an annotation states (``None``: none) and the types it allows."""
    rule = None
    if typing.get_origin(hint) is typing.Annotated:
        hint, rule = typing.get_args(hint)
    union = typing.get_origin(hint) in (typing.Union, type(int | None))
    return rule, set(typing.get_args(hint) if union else (hint,))


def _optimizer_classes():
    return sorted(
        (
            getattr(fg.train, name)
            for name in fg.train.__all__
            if isinstance(getattr(fg.train, name), type)
            and issubclass(getattr(fg.train, name), fg.train.TF1Optimizer)
            and getattr(fg.train, name) is not fg.train.TF1Optimizer
        ),
        key=lambda c: c.__name__,
    )


def _arguments(cls):
    """``(name, default)`` of each argument of ``cls.__init__`` (``REQUIRED``'s value
    for one without a default)."""
    parameters = list(inspect.signature(cls.__init__).parameters.values())[1:]
    return {
        p.name: REQUIRED[p.name] if p.default is p.empty else p.default
        for p in parameters
        if p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL)
    }


def _bad_values(cls):
    """``(argument, bad value, error, match)`` for every argument of ``cls``."""
    hints = _hints(cls)
    cases = []
    for name in _arguments(cls):
        if name == "learning_rate":
            cases += [
                (name, -1.0, ValueError, r"learning_rate must be finite and >= 0, got -1\.0; pass"),
                (name, float("nan"), ValueError, "learning_rate must be finite and >= 0, got nan"),
                (name, "0.1", TypeError, "learning_rate must be a number or a schedule.*; pass"),
                (name, lambda s: jnp.ones(2), TypeError, r"learning_rate\(step\) returns.*; pass"),
            ]
            continue
        rule, kinds = _kinds(hints[name])
        functions = any(  # a schedule, a function of the step (not a var_list's predicate)
            typing.get_origin(k) is collections.abc.Callable and len(typing.get_args(k)[0]) == 1
            for k in kinds
        )
        in_range = "; pass values in range"
        if bool in kinds and kinds <= {bool, type(None)}:
            match = f"{name} must be True or False, got 'yes'; pass values of these kinds"
            cases.append((name, "yes", TypeError, match))
        elif int in kinds and float not in kinds and rule is not None:
            match = f"{name} must be an integer, got 2.5; pass values of these kinds"
            cases.append((name, 2.5, TypeError, match))
            match = f"{name} must be finite and {re.escape(rule)}, got 0{in_range}"
            cases.append((name, 0, ValueError, match))
        elif rule is not None:
            cases.append((name, "1", TypeError, f"{name} must be a number, got '1'; pass Python"))
            said = "finite" if rule == "finite" else f"finite and {re.escape(rule)}"
            for value in [float("nan"), float("inf"), *BAD[rule]]:
                cases.append((name, value, ValueError, f"{name} must be {said}, got .*{in_range}"))
        if functions:
            match = rf"{name}(\(step\) returns|.*fails as schedule).*; pass a function"
            cases.append((name, lambda s: jnp.ones(2), TypeError, match))
        if functions and rule is None:
            match = f"{name} must be a function of global_step, got 0.5; pass"
            cases.append((name, 0.5, TypeError, match))
        if name in ("skip_list", "exclude_from_weight_decay", "exclude_from_layer_adaptation"):
            match = rf"{name} must be None or a list of regular expressions.*; pass e\.g\."
            cases.append((name, "bias", TypeError, match))
        if name == "decay_var_list":
            match = "decay_var_list is the string 'W'; pass a list of variable names"
            cases.append((name, "W", TypeError, match))
        if name in ("simulated_quantize_bits", "parameter_encoding"):
            cases.append((name, 8, ValueError, "are not supported; leave both None"))
    return cases


CASES = [
    pytest.param(cls, name, value, error, match, id=f"{cls.__name__}-{name}-{value!r:.12}")
    for cls in _optimizer_classes()
    for name, value, error, match in _bad_values(cls)
]


def test_every_optimizer_is_covered() -> None:
    covered = {c.values[0].__name__ for c in CASES}
    assert len(covered) >= 21, sorted(covered)  # tf.train's 10 and the projects' 11


@pytest.mark.parametrize(("cls", "name", "value", "error", "match"), CASES)
def test_a_bad_argument_gets_the_one_error_naming_it_and_the_fix(
    cls, name, value, error, match
) -> None:
    arguments = {**_arguments(cls), name: value}
    with pytest.raises(error, match=rf"fg\.train\.{cls.__name__}\(.*\): .*{match}"):
        cls(**arguments)


@pytest.mark.parametrize("cls", _optimizer_classes(), ids=lambda c: c.__name__)
def test_python_float_parameters_train(cls) -> None:
    opt = cls(**_arguments(cls))
    state = opt.init({"w": 1.0, "b": [2.0, -3.0]})
    for _ in range(2):
        state, _ = opt.minimize(lambda p: p["w"] ** 2 + p["b"][0] * p["b"][1], state)
    leaves = [float(x) for x in jax.tree.leaves(state.params)]
    assert all(np.isfinite(leaves)), leaves
    assert leaves != [2.0, -3.0, 1.0], leaves


#: The wrappers', the group's and ``optimize_loss``'s arguments: the call, the error, the
#: fix the message names.
_OPT = fg.train.AdamOptimizer(0.1)
OTHERS = [
    pytest.param(lambda: fg.train.Optimizer(optax.sgd), TypeError, "tx must be an optax", id="tx"),
    pytest.param(lambda: fg.train.LossScaleOptimizer(optax.sgd(0.1)), TypeError,
                 r"LossScaleOptimizer\(fg\.train\.Optimizer\(tx\)\)", id="ls-opt"),
    pytest.param(lambda: fg.train.LossScaleOptimizer(_OPT, dynamic=1), TypeError,
                 "dynamic=1 is not True or False", id="ls-dynamic"),
    pytest.param(lambda: fg.train.LossScaleOptimizer(_OPT, initial_scale=float("nan")),
                 ValueError, "initial_scale=nan is not in", id="ls-scale"),
    pytest.param(lambda: fg.train.LossScaleOptimizer(_OPT, growth_steps=0), ValueError,
                 "growth_steps=0 is not in", id="ls-growth"),
    pytest.param(lambda: fg.train.LossScaleOptimizer(_OPT, multiplier=1.0), ValueError,
                 "multiplier=1.0 is not in", id="ls-multiplier"),
    pytest.param(lambda: fg.train.MovingAverageOptimizer(optax.sgd(0.1)), TypeError,
                 r"MovingAverageOptimizer\(fg\.train\.Optimizer\(tx\)\)", id="ma-opt"),
    pytest.param(lambda: fg.train.MovingAverageOptimizer(_OPT, float("nan")), ValueError,
                 "average_decay=nan is not in", id="ma-decay"),
    pytest.param(lambda: fg.train.MovingAverageOptimizer(_OPT, 0.9, num_updates=-1),
                 ValueError, "num_updates=-1 is negative", id="ma-num-updates"),
    pytest.param(lambda: fg.train.MovingAverageOptimizer(_OPT, 0.9, sequential_update=1),
                 TypeError, "sequential_update=1 is not True or False", id="ma-sequential"),
    pytest.param(lambda: fg.train.OptimizerGroup(a=optax.sgd(0.1)), TypeError,
                 r"a= is GradientTransformation.*fg\.train\.Optimizer\(tx\)", id="group"),
    pytest.param(lambda: fg.train.optimize_loss(-0.1, "SGD"), ValueError,
                 "learning_rate must be finite and >= 0", id="ol-rate"),
    pytest.param(lambda: fg.train.optimize_loss(0.1, "sgd"), ValueError,
                 r"did you mean 'SGD'", id="ol-name"),
    pytest.param(lambda: fg.train.optimize_loss(0.1, "SGD", gradient_noise_scale=-1.0),
                 ValueError, "gradient_noise_scale must be finite and >= 0", id="ol-noise"),
    pytest.param(lambda: fg.train.optimize_loss(0.1, "SGD", gradient_noise_scale=0.1, key=0),
                 TypeError, "key must be a PRNG key", id="ol-key"),
    pytest.param(lambda: fg.train.optimize_loss(0.1, "SGD", clip_gradients=0.0), ValueError,
                 "clip_gradients must be finite and > 0", id="ol-clip"),
    pytest.param(lambda: fg.train.optimize_loss(0.1, "SGD", gradient_multipliers={"w": "2"}),
                 TypeError, "gradient_multipliers must map variable names to numbers",
                 id="ol-multipliers"),
    pytest.param(lambda: fg.train.optimize_loss(0.1, "SGD", learning_rate_decay_fn=3),
                 TypeError, "learning_rate_decay_fn must be a function", id="ol-decay-fn"),
    pytest.param(lambda: fg.train.optimize_loss(0.1, "SGD", update_ops=[1]), ValueError,
                 "a function has no update ops", id="ol-update-ops"),
    pytest.param(lambda: fg.train.optimize_loss(0.1, "SGD", summaries=["norm"]), ValueError,
                 "summaries .* are not among TensorFlow's", id="ol-summaries"),
    pytest.param(lambda: fg.train.optimize_loss(0.1, "SGD", increment_global_step=1),
                 TypeError, "increment_global_step=1 is not a bool", id="ol-increment"),
]  # fmt: skip


@pytest.mark.parametrize(("make", "error", "match"), OTHERS)
def test_the_wrappers_group_and_optimize_loss_say_the_fix(make, error, match) -> None:
    with pytest.raises(error, match=match):
        make()
