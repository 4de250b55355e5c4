"""fg.train.variable_names: TensorFlow-style scope names for pytree leaves."""

from typing import NamedTuple

import jax
import jax.numpy as jnp
import pytest

import funcgrad as fg


class Layer(NamedTuple):
    kernel: jax.Array
    bias: jax.Array


@pytest.mark.parametrize(
    ("params", "names"),
    [
        pytest.param({"W": jnp.ones(2), "b": jnp.ones(())}, ["W", "b"], id="dict"),
        pytest.param({"layer1": {"kernel": jnp.ones(2)}}, ["layer1/kernel"], id="nested_dict"),
        pytest.param([{"W": jnp.ones(2)}, {"W": jnp.ones(2)}], ["0/W", "1/W"], id="list_of_dicts"),
        pytest.param((jnp.ones(2), [jnp.ones(2)]), ["0", "1/0"], id="tuple_and_list"),
        pytest.param(
            {"l": Layer(jnp.ones(2), jnp.ones(2))}, ["l/kernel", "l/bias"], id="namedtuple"
        ),
        pytest.param(jnp.ones(3), [""], id="bare_array"),
        pytest.param({"a": None, "b": jnp.ones(1)}, ["b"], id="none_is_no_variable"),
        pytest.param(
            {"f": jax.nn.relu, "n": jnp.int32(3), "flag": True, "s": "x", "w": jnp.ones(2)},
            ["w"],
            id="only_floating_leaves_are_variables",
        ),
        pytest.param({"lr": 0.5, "c": 1 + 2j}, ["c", "lr"], id="python_floats_are_variables"),
    ],
)
def test_variable_names_join_keys_with_slashes(params, names) -> None:
    assert fg.train.variable_names(params) == names


def test_names_follow_compute_gradients_order() -> None:
    params = {"z": jnp.float32(1.0), "a": [jnp.float32(2.0), jnp.float32(3.0)]}
    opt = fg.train.GradientDescentOptimizer(0.1)
    gvs = opt.compute_gradients(lambda p: p["z"] * p["a"][1], params)
    named = dict(zip(fg.train.variable_names(params), gvs, strict=True))
    assert float(named["z"][0]) == 3.0 and named["a/0"][0] is None and float(named["a/1"][0]) == 1.0
