"""``var_list``: which variables of the parameters an optimizer differentiates and trains."""

from __future__ import annotations

from collections.abc import Callable
from collections.abc import Sequence
from typing import Any

import jax
import numpy as np

from funcgrad import _checks
from funcgrad._types import PyTree
from funcgrad.train._variables import is_variable
from funcgrad.train.names import variable_names

#: Which leaves to train: ``None`` (all), a list of variable names, a predicate
#: ``(name, leaf) -> bool``, or a boolean pytree mask (a prefix of the parameters).
VarList = None | Sequence[str] | Callable[[str, Any], bool] | PyTree


def _is_names(var_list: Any) -> bool:
    return isinstance(var_list, list | tuple) and all(isinstance(n, str) for n in var_list)


def _mask_leaves(caller: str, params: PyTree, mask: PyTree, name: str) -> list[bool]:
    try:
        full = jax.tree.map(lambda m, sub: jax.tree.map(lambda _: m, sub), mask, params)
    except ValueError:
        raise ValueError(
            f"{caller}: the {name} mask has structure {jax.tree.structure(mask)}, which "
            f"is not a prefix of the parameters' {jax.tree.structure(params)}; pass one "
            "bool per variable (or per subtree)."
        ) from None
    variables = [is_variable(leaf) for leaf in jax.tree.leaves(params)]
    leaves = [m for m, v in zip(jax.tree.leaves(full), variables, strict=True) if v]
    if not all(isinstance(m, bool | np.bool_) for m in leaves):
        raise TypeError(
            f"{caller}: a {name} mask must hold Python bools, got "
            f"{sorted({type(m).__name__ for m in leaves})}; pass True or False per "
            "variable, or a list of variable names."
        )
    return [bool(m) for m in leaves]


def _kinds(params: PyTree) -> str:
    kinds = sorted(
        {
            str(leaf.dtype) if hasattr(leaf, "dtype") else type(leaf).__name__
            for leaf in jax.tree.leaves(params)
        }
    )
    return ", ".join(kinds) if kinds else "no leaves"


def select(caller: str, params: PyTree, var_list: VarList) -> list[bool]:
    """For each variable of ``params`` (``variable_names`` order), whether ``var_list``
    selects it for training; an error when it selects none."""
    selected = selection(caller, params, var_list)
    names = variable_names(params)
    if not names:
        raise ValueError(
            f"{caller}: No variables to optimize: the parameters hold no floating-point "
            f"array (a variable), only {_kinds(params)}; keep the weights as float arrays, "
            "e.g. {'W': jnp.zeros((3, 2))}."
        )
    if not any(selected):
        raise ValueError(
            f"{caller}: No variables to optimize: var_list selects none of {names}; "
            "select at least one variable."
        )
    return selected


def outside(params: PyTree, selected: list[bool], allowed: list[bool]) -> list[str]:
    """The names of the variables ``selected`` picks and ``allowed`` does not."""
    pairs = zip(variable_names(params), selected, allowed, strict=True)
    return [n for n, s, a in pairs if s and not a]


def selection(caller: str, params: PyTree, var_list: VarList, name: str = "var_list") -> list[bool]:
    """For each variable of ``params`` (``variable_names`` order), whether ``var_list``
    selects it, in any of its forms; none selected is no error here.  ``name`` is the
    argument it was given as (``decay_var_list``), for the messages."""
    names = variable_names(params)
    if isinstance(var_list, str):
        raise TypeError(
            f"{caller}: {name} is the string {var_list!r}; pass a list of variable names, "
            f"e.g. [{var_list!r}]."
        )
    if var_list is None:
        selected = [True] * len(names)
    elif _is_names(var_list):
        wanted = list(var_list)  # type: ignore[arg-type]
        unknown = [f"{n!r}{_checks.did_you_mean(n, names)}" for n in wanted if n not in names]
        if unknown:
            raise ValueError(
                f"{caller}: {name} names {', '.join(unknown)}, which are not variables; "
                f"the variables are {names} (see fg.train.variable_names(params))."
            )
        selected = [n in wanted for n in names]
    elif callable(var_list):
        leaves = [leaf for leaf in jax.tree.leaves(params) if is_variable(leaf)]
        selected = [bool(var_list(n, leaf)) for n, leaf in zip(names, leaves, strict=True)]
    else:
        selected = _mask_leaves(caller, params, var_list, name)
    return selected
