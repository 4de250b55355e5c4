"""A function whose named ops differentiate with gradient functions ``fn(op, grad)``.

Design note
-----------
The machinery shared by ``gradient_override_map`` (the user's registered gradients)
and ``tensorflow_conventions`` (TensorFlow's gradient functions): ``f`` is traced to a
jaxpr at each call -- array leaves of its arguments traced, everything else constant
-- and evaluated again by ``_rewrite``, with each equation whose name (``_rewrite.key``)
has a gradient re-emitted inside a ``custom_vjp`` whose backward builds the
:class:`~funcgrad._types.Op` and calls the gradient function.  Its result goes through
``_differentiate.input_cotangents``, the one check every gradient function's cotangents pass:
``None`` is zero, a cotangent is cast to its input's dtype and must have its shape.

What it assumes: the gradient function is called only while differentiating, with the
op's input and output values of that call; literal inputs (``jnp.maximum(x, 0.0)``'s
``0.0``) are inputs too, and their cotangents are dropped.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from collections.abc import Mapping
from typing import Any

import jax
import numpy as np

from funcgrad._core import differentiate as _differentiate
from funcgrad._core import jax_internals as _jax
from funcgrad._core import rewrite as _rewrite
from funcgrad._core import taps as _taps
from funcgrad._types import GradientFunction
from funcgrad._types import Op
from funcgrad._types import replace_at


def _rule(op_type: str, fn: GradientFunction) -> _rewrite.Rule:
    """``fn`` as a rewrite rule: the op as an ``Op`` in, checked cotangents out."""
    caller = f"the gradient for {op_type!r} ({getattr(fn, '__name__', fn)!r})"

    def rule(
        inputs: tuple[Any, ...], outputs: tuple[Any, ...], params: dict[str, Any], cts: Any
    ) -> list[Any]:
        grads = fn(Op(op_type, inputs, outputs, params), cts[0] if len(cts) == 1 else cts)
        return _differentiate.input_cotangents(caller, grads, inputs, bare=False)

    return rule


def with_gradients(
    f: Callable[..., Any],
    gradients: Mapping[str, tuple[str, GradientFunction]],
    *,
    caller: str,
    prefix: str,
    transparent: bool = False,
    on_trace: Callable[[set[str]], None] | None = None,
) -> Callable[..., Any]:
    """``f`` with each op named in ``gradients`` (JAX name -> (op type, fn)) given ``fn``.

    Each matched equation becomes a ``custom_vjp`` named ``prefix`` + its name, made
    ``transparent`` to later overrides if asked (``_rewrite.with_rule``); ``on_trace``
    gets the names matched, each time ``f`` is traced.  Forward mode through them is
    refused with the fix, in the words of ``caller``.
    """
    rules = {name: _rule(op_type, fn) for name, (op_type, fn) in gradients.items()}

    @functools.wraps(f)
    def overridden(*args: Any, **kwargs: Any) -> Any:
        leaves, tree = jax.tree.flatten((args, kwargs))
        dynamic = [i for i, v in enumerate(leaves) if isinstance(v, jax.Array | np.ndarray)]
        out_tree: list[Any] = []

        def flat(*traced: Any) -> list[Any]:
            a, k = jax.tree.unflatten(tree, replace_at(leaves, dynamic, traced))
            with _taps.traced_again(values, traced):
                out, treedef = jax.tree.flatten(f(*a, **k))
            out_tree.append(treedef)
            return out

        values = [leaves[i] for i in dynamic]
        closed = _jax.trace(flat, *values)
        matched: set[str] = set()

        def replace(eqn: _jax.Eqn, invals: list[Any]) -> list[Any]:
            name = _rewrite.key(eqn)
            matched.add(name)
            rule = rules[name]
            return _rewrite.with_rule(prefix + name, eqn, invals, rule, transparent=transparent)

        rewriter = _rewrite.Rewriter(
            lambda eqn: _rewrite.key(eqn) in rules, replace, see_through=True
        )
        with _rewrite.reverse_mode_only(caller):
            outs = rewriter.evaluate(closed.jaxpr, closed.consts, *values)
        if on_trace is not None:
            on_trace(matched)
        return jax.tree.unflatten(out_tree[-1], outs)

    return overridden
