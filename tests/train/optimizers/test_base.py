"""``TF1Optimizer``: the one base, as the classes written on it use it."""

from typing import ClassVar

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import funcgrad as fg

#: ``tf.train``'s optimizers, whose dense step is an optax chain.
CHAINED = [
    pytest.param(lambda: fg.train.GradientDescentOptimizer(0.1), id="sgd"),
    pytest.param(lambda: fg.train.MomentumOptimizer(0.1, 0.9), id="momentum"),
    pytest.param(lambda: fg.train.MomentumOptimizer(0.1, 0.9, use_nesterov=True), id="nesterov"),
    pytest.param(lambda: fg.train.AdamOptimizer(0.1), id="adam"),
    pytest.param(lambda: fg.train.LazyAdamOptimizer(0.1), id="lazy_adam"),
    pytest.param(lambda: fg.train.RMSPropOptimizer(0.1, momentum=0.5), id="rmsprop"),
    pytest.param(
        lambda: fg.train.RMSPropOptimizer(0.1, momentum=0.5, centered=True), id="rmsprop_centered"
    ),
    pytest.param(lambda: fg.train.AdagradOptimizer(0.1), id="adagrad"),
    pytest.param(lambda: fg.train.AdadeltaOptimizer(1.0), id="adadelta"),
    pytest.param(
        lambda: fg.train.FtrlOptimizer(0.1, l1_regularization_strength=0.01, beta=0.1), id="ftrl"
    ),
    pytest.param(lambda: fg.train.ProximalGradientDescentOptimizer(0.1, 0.01, 0.02), id="prox_sgd"),
    pytest.param(lambda: fg.train.ProximalAdagradOptimizer(0.1, 0.1, 0.01), id="prox_adagrad"),
]

IDS = jnp.array([0, 2, 2, 1])


def _loss(p):
    h = jnp.tanh(p["E"][IDS] @ p["W"] + p["b"][None, :])
    return jnp.sum((h - 0.3) ** 2) + 0.1 * jnp.sum(p["W"] ** 2)


def _params():
    rng = np.random.default_rng(0)
    return {
        "E": jnp.asarray(rng.normal(size=(5, 3)), jnp.float32),
        "W": jnp.asarray(rng.normal(size=(3, 2)), jnp.float32),
        "b": jnp.asarray(rng.normal(size=(2,)), jnp.float32),
    }


def _by_rules(opt):
    """``opt``'s class with its dense rule written again (``super()``'s): stepped by the
    rules, variable by variable, not by its chain."""

    class ByRules(type(opt)):
        def _apply_dense(self, grad, var, slots, step):
            return super()._apply_dense(grad, var, slots, step)

    rules = object.__new__(ByRules)
    rules.__dict__.update({k: v for k, v in opt.__dict__.items() if k != "tx"})
    return rules


@pytest.mark.parametrize("make", CHAINED)
def test_a_classs_rules_are_the_rules_of_its_chain(make) -> None:
    """The rules a class writes (``_apply_dense``, ``_apply_sparse``, ``_prepare``,
    ``_finish``) step as its optax chain does, dense and sparse, and name the same slots."""
    chain = make()
    rules = _by_rules(chain)
    assert isinstance(rules.tx.init(_params()).inner_state, fg.train.TF1OptimizerState)
    states = [opt.init(_params()) for opt in (chain, rules)]
    for _ in range(3):
        states = [
            jax.jit(opt.minimize, static_argnums=0)(_loss, s)[0]
            for opt, s in zip((chain, rules), states, strict=True)
        ]
    chex.assert_trees_all_close(states[1].params, states[0].params, rtol=2e-6, atol=1e-7)
    slots = [opt.tf_slots(s.opt_state) for opt, s in zip((chain, rules), states, strict=True)]
    assert list(slots[0]) == [k for k in list(slots[1]) if k in slots[0]]
    for key in slots[0]:
        chex.assert_trees_all_close(slots[1][key], slots[0][key], rtol=2e-6, atol=1e-7)
    powers = [opt.tf_non_slots(s.opt_state) for opt, s in zip((chain, rules), states, strict=True)]
    chex.assert_trees_all_close(powers[1], powers[0])
    assert chain.tf_names(_params()) == rules.tf_names(_params())


# A user's subclass cannot corrupt the caller's state, and its mistakes name the hook.

W = {"W": jnp.ones(3)}


def _step(opt, params=W):
    return opt.minimize(lambda p: jnp.sum(p["W"] ** 2), opt.init(params))[0]


class _Rule(fg.train.TF1Optimizer):
    """A one-slot rule whose dense result is given by ``result(var, m)``."""

    slots: ClassVar = {"m": "Rule"}

    def __init__(self, result, non_slots=None, finish=None):
        super().__init__(0.1)
        self._result, self._non, self._finish_with = result, non_slots or {}, finish

    def _non_slots(self):
        return self._non

    def _apply_dense(self, grad, var, slots, step):
        return self._result(var, slots["m"] + grad)

    def _finish(self, non_slots, step):
        return non_slots if self._finish_with is None else self._finish_with(non_slots)


@pytest.mark.parametrize(
    ("result", "match"),
    [
        pytest.param(lambda v, m: (v[:, None], {"m": m}), r"the variable 'W' of shape \(3, 1\) "
                     r"for \(3,\)", id="var_broadcast"),
        pytest.param(lambda v, m: (v.sum(), {"m": m}), r"the variable 'W' of shape \(\) for",
                     id="var_scalar"),
        pytest.param(lambda v, m: (v, {"m": m[None, :]}), r"the slot 'm' of shape \(1, 3\)",
                     id="slot_grows"),
    ],
)  # fmt: skip
def test_a_rule_of_the_wrong_shape_is_an_error_not_a_broadcast(result, match) -> None:
    with pytest.raises(
        ValueError, match=rf"_Rule\._apply_dense: it returns .*{match}.*each of its"
    ):
        _step(_Rule(result))


@pytest.mark.parametrize(
    ("result", "error", "match"),
    [
        pytest.param(lambda v, m: None, TypeError, r"None for 'W'; return \(new_var, "
                     r"new_slots\)", id="none"),
        pytest.param(lambda v, m: (v, m), TypeError, "a tuple of 2 for 'W'", id="no_dict"),
        pytest.param(lambda v, m: (v, m, {}), TypeError, "a tuple of 3", id="triple"),
        pytest.param(lambda v, m: (v, {}), ValueError, r"no new value for the slots \['m'\]",
                     id="slot_dropped"),
        pytest.param(lambda v, m: (v, {"m": m, "x": m}), ValueError,
                     r"slots \['x'\] that 'W' does not have", id="slot_extra"),
    ],
)  # fmt: skip
def test_a_rule_that_returns_the_wrong_thing_names_the_hook_and_what_to_return(
    result, error, match
) -> None:
    with pytest.raises(error, match=rf"fg\.train\._Rule\._apply_dense: it returns {match}"):
        _step(_Rule(result))


@pytest.mark.parametrize(
    ("non_slots", "finish", "error", "match"),
    [
        pytest.param({"count": "zero"}, None, TypeError, r"_non_slots\(\): it returns 'count': "
                     r"'zero'; each non-slot .* a Python number", id="string"),
        pytest.param({"count": 2**40}, None, ValueError, r"'count': 1099511627776, beyond the "
                     "int32", id="wide"),
        pytest.param({"global_step": 0}, None, ValueError, "names a non-slot 'global_step'",
                     id="global_step"),
        pytest.param({"a": 1.0, "b": 2.0}, lambda n: {"a": n["a"]}, ValueError,
                     r"_finish: it returns no value for the non-slots \['b'\]", id="dropped"),
        pytest.param({"a": 1.0}, lambda n: {"a": n["a"] * jnp.ones(3)}, ValueError,
                     r"_finish: it returns 'a' of shape \(3,\), where a non-slot is a scalar",
                     id="shaped"),
        pytest.param({"a": 1.0}, lambda n: [n["a"]], TypeError,
                     r"_finish: it returns \[.*\]; return the dict", id="not_a_dict"),
    ],
)  # fmt: skip
def test_non_slots_of_the_wrong_kind_name_the_hook(non_slots, finish, error, match) -> None:
    with pytest.raises(error, match=match):
        _step(_Rule(lambda v, m: (v, {"m": m}), non_slots, finish))


def test_a_rule_cannot_write_into_the_callers_state() -> None:
    class Writes(_Rule):
        def _apply_dense(self, grad, var, slots, step):
            step.non_slots["a"] = jnp.float32(9.0)
            return var, slots

    opt = Writes(None, {"a": 1.0})
    state = opt.init(W)
    with pytest.raises(TypeError, match=r"step\.non_slots is read-only .* return new values"):
        opt.minimize(lambda p: jnp.sum(p["W"]), state)
    assert float(state.opt_state.inner_state.non_slots["a"]) == 1.0


def test_a_subclass_declares_its_slots_as_a_dict() -> None:
    class Listed(fg.train.TF1Optimizer):
        slots: ClassVar = ["m"]

    with pytest.raises(TypeError, match=r"Listed\.slots must map each slot's key to its "
                       r"TensorFlow name, got \['m'\]; declare e\.g\. slots = \{'m'"):  # fmt: skip
        Listed(0.1)


def test_a_subclass_that_does_not_call_the_bases_init_is_told_to() -> None:
    class NoSuper(fg.train.TF1Optimizer):
        def __init__(self, rate):
            self.rate = rate

        def _apply_dense(self, grad, var, slots, step):
            return var - grad, slots

    with pytest.raises(TypeError, match=r"NoSuper: its __init__ does not call super\(\)\."
                       r"__init__\(learning_rate, \*\*hyperparameters\)"):  # fmt: skip
        NoSuper(0.1).init(W)


@pytest.mark.parametrize(
    "rate", [0.5, fg.train.exponential_decay(0.5, 1, 0.5)], ids=["number", "schedule"]
)
def test_self_learning_rate_in_a_rule_says_to_read_the_steps(rate) -> None:
    class KeepsRate(fg.train.TF1Optimizer):
        def __init__(self, learning_rate):
            super().__init__(learning_rate)
            self.learning_rate = learning_rate  # as SimCLR's LARS keeps it

        def _apply_dense(self, grad, var, slots, step):
            return var - self.learning_rate * grad, {}

    with pytest.raises(TypeError, match=r"KeepsRate\.learning_rate: a rule reads the rate of "
                       r"its step, step\.learning_rate"):  # fmt: skip
        _step(KeepsRate(rate))


def test_a_schedule_is_called_once_a_step() -> None:
    calls = []

    def schedule(step):
        calls.append(step)
        return 0.1 * jnp.ones([])

    ids = jnp.array([0, 1])
    for opt in (fg.train.AdamOptimizer(schedule), fg.train.AdamWOptimizer(0.1, schedule)):
        state = opt.init({"E": jnp.ones((3, 2)), "W": jnp.ones(2)})
        before = len(calls)
        for _ in range(3):  # a dense and a sparse variable: one rate for both
            state, _ = opt.minimize(lambda p: jnp.sum(p["E"][ids] @ p["W"]), state)
        assert len(calls) - before == 3, type(opt).__name__


def test_adams_fed_betas_say_the_way() -> None:
    with pytest.raises(TypeError, match=r"beta1 is a function \(a schedule\?\), and Adam's "
                       r"betas here are Python numbers; .*optax\.inject_hyperparams\("
                       r"fg\.train\.scale_by_tf_adam\)"):  # fmt: skip
        fg.train.AdamOptimizer(0.1, beta1=fg.train.piecewise_constant([3], [0.5, 0.9]))
    with pytest.raises(TypeError, match=r"beta2 is an array, .*inject_hyperparams"):
        fg.train.NadamOptimizer(0.1, beta2=jnp.float32(0.99))
