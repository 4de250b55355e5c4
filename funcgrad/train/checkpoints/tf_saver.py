"""Resume a TensorFlow 1.x run: ``tf.train.Saver`` checkpoints to and from a ``TrainState``.

A TF1 program that trains with one of the nine ``tf.train`` optimizers and saves with
``tf.compat.v1.train.Saver`` keeps, under TensorFlow's names, what a funcgrad
``TrainState`` holds: the variables, the optimizer's slot variables (``W/Adam``,
``W/Momentum``, ...) and ``global_step``.  :func:`restore_tf_checkpoint` reads them into
a state; :func:`save_tf_checkpoint` writes a state for TensorFlow.  Continued training
gives TensorFlow's numbers (to float32 rounding).  The files are read and written by
``funcgrad.train.checkpoints._tf_bundle``, with NumPy alone: TensorFlow is not needed.

The names, per variable ``v`` (a name of :func:`~funcgrad.train.variable_names`):

========================================  ===============================================
optimizer                                 checkpoint names besides ``v``, ``global_step``
========================================  ===============================================
GradientDescent, ProximalGradientDescent  none
Momentum                                  ``v/Momentum``
Adam                                      ``v/Adam`` (m), ``v/Adam_1`` (v); once:
                                          ``beta1_power``, ``beta2_power``
RMSProp                                   ``v/RMSProp`` (mean square), ``v/RMSProp_1``
                                          (momentum)
RMSProp, centered                         ``v/RMSProp`` (mean square), ``v/RMSProp_1``
                                          (mean gradient), ``v/RMSProp_2`` (momentum)
Adagrad, ProximalAdagrad                  ``v/Adagrad``, ``v/ProximalAdagrad``
Adadelta                                  ``v/Adadelta`` (accum), ``v/Adadelta_1``
                                          (accum_update)
Ftrl                                      ``v/Ftrl`` (accumulator), ``v/Ftrl_1`` (linear)
========================================  ===============================================

Where funcgrad's state differs from TensorFlow's variables: RMSProp's momentum is held
with the opposite sign (the learning rate's sign is applied before it); Adam keeps a
step count ``t`` where TensorFlow keeps the float32 products ``beta1_power`` =
``beta1 ** (t + 1)`` (and ``beta2_power``), so ``t`` is recovered from them; the learning
rate and every other hyperparameter are not in a TensorFlow checkpoint, so they come
from ``optimizer`` (build it with the TF run's arguments).
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Mapping
from typing import Any
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from funcgrad import _checks
from funcgrad.train import _var_list
from funcgrad.train._var_list import VarList
from funcgrad.train.checkpoints import _tf_bundle
from funcgrad.train.names import variable_names
from funcgrad.train.optimizer import Optimizer
from funcgrad.train.optimizers.tf1 import AdadeltaOptimizer
from funcgrad.train.optimizers.tf1 import AdagradOptimizer
from funcgrad.train.optimizers.tf1 import AdamOptimizer
from funcgrad.train.optimizers.tf1 import FtrlOptimizer
from funcgrad.train.optimizers.tf1 import GradientDescentOptimizer
from funcgrad.train.optimizers.tf1 import MomentumOptimizer
from funcgrad.train.optimizers.tf1 import ProximalAdagradOptimizer
from funcgrad.train.optimizers.tf1 import ProximalGradientDescentOptimizer
from funcgrad.train.optimizers.tf1 import RMSPropOptimizer
from funcgrad.train.state import TrainState
from funcgrad.train.wrappers.loss_scale import LossScaleOptimizer

__all__ = ["restore_tf_checkpoint", "save_tf_checkpoint"]

#: A slot: TensorFlow's suffix, the path to its tree in the optimizer's ``inner_state``
#: (tuple indices and field names), and the sign funcgrad holds it with.
_Slot = tuple[str, tuple[int | str, ...], int]
_RMSPROP: tuple[_Slot, ...] = (("RMSProp", (0, "nu"), 1), ("RMSProp_1", (2, "trace"), -1))
_RMSPROP_CENTERED: tuple[_Slot, ...] = (
    ("RMSProp", (0, "nu"), 1),
    ("RMSProp_1", (0, "mu"), 1),
    ("RMSProp_2", (2, "trace"), -1),
)
#: Each TF1 optimizer's slots, in TensorFlow's order of creation (which numbers them).
_SLOTS: dict[type, tuple[_Slot, ...]] = {
    GradientDescentOptimizer: (),
    ProximalGradientDescentOptimizer: (),
    MomentumOptimizer: (("Momentum", (0, "trace"), 1),),
    AdamOptimizer: (("Adam", (0, "mu"), 1), ("Adam_1", (0, "nu"), 1)),
    RMSPropOptimizer: _RMSPROP,
    AdagradOptimizer: (("Adagrad", (0, "sum_of_squares"), 1),),
    AdadeltaOptimizer: (("Adadelta", (0, "e_g"), 1), ("Adadelta_1", (0, "e_x"), 1)),
    FtrlOptimizer: (("Ftrl", ("accumulator",), 1), ("Ftrl_1", ("linear",), 1)),
    ProximalAdagradOptimizer: (("ProximalAdagrad", ("accumulator",), 1),),
}
_BETA_POWERS = ("beta1_power", "beta2_power")
_STORABLE = set(_tf_bundle.DTYPES.values())
_INT32_MAX = 2**31 - 1


class _Item(NamedTuple):
    """One value of the state under its TensorFlow name.

    ``key`` is the name before ``name_map`` (what its keys refer to), ``name`` after it
    (``None``: not in the checkpoint, the state's value is kept).  ``slot`` is the index of
    the slot in the optimizer's table (``-1`` for a variable), ``leaf`` the index of the
    variable.
    """

    key: str
    name: str | None
    slot: int
    leaf: int


def _get(node: Any, path: tuple[int | str, ...]) -> Any:
    for step in path:
        node = node[step] if isinstance(step, int) else getattr(node, step)
    return node


def _put(node: Any, path: tuple[int | str, ...], value: Any) -> Any:
    """``node`` with the subtree at ``path`` replaced by ``value`` (tuples and NamedTuples)."""
    if not path:
        return value
    step, rest = path[0], path[1:]
    if isinstance(step, int):
        return (*node[:step], _put(node[step], rest, value), *node[step + 1 :])
    return node._replace(**{step: _put(getattr(node, step), rest, value)})


def _slots(caller: str, optimizer: Any) -> tuple[_Slot, ...]:
    """The optimizer's slot table; a ``TypeError`` for any other optimizer."""
    if type(optimizer) not in _SLOTS:
        supported = ", ".join(sorted(kind.__name__ for kind in _SLOTS))
        fix = "pass the one the TensorFlow run used, with its arguments"
        if isinstance(optimizer, LossScaleOptimizer):
            fix = (
                "a LossScaleOptimizer's scale (TensorFlow's current_loss_scale and "
                "good_steps) is not read or written; pass the optimizer it wraps, "
                "opt.optimizer, with its part of the state, TrainState(state.params, "
                "state.opt_state.inner_state, state.global_step)"
            )
        raise TypeError(
            f"{caller}: the optimizer, a {type(optimizer).__name__}, has no TensorFlow 1.x "
            f"names for its state; the supported optimizers are fg.train's {supported} "
            f"(unwrapped) — {fix}."
        )
    if isinstance(optimizer, RMSPropOptimizer) and optimizer.hyperparameters["centered"]:
        return _RMSPROP_CENTERED
    return _SLOTS[type(optimizer)]


def _check_state(caller: str, state: Any, optimizer: Optimizer) -> None:
    if not isinstance(state, TrainState):
        raise TypeError(
            f"{caller}: state is a {type(state).__name__}, not a TrainState; pass "
            "optimizer.init(params) (for a restore, any state of the right shapes)."
        )
    expected: Any = jax.tree.structure(jax.eval_shape(optimizer.tx.init, state.params))
    if jax.tree.structure(state.opt_state) != expected:
        raise ValueError(
            f"{caller}: state.opt_state is not the state of this "
            f"{type(optimizer).__name__} ({jax.tree.structure(state.opt_state)}); pass "
            "the state optimizer.init(params) made or its minimize returned."
        )


def _plan(
    caller: str,
    state: TrainState,
    optimizer: Optimizer,
    name_map: Mapping[str, str | None] | None,
    var_list: VarList,
) -> list[_Item]:
    """Every value the checkpoint holds for ``state``, by TensorFlow name."""
    slots = _slots(caller, optimizer)
    _check_state(caller, state, optimizer)
    names = dict(name_map) if isinstance(name_map, Mapping) else {}
    bad = [k for k, v in names.items() if not isinstance(k, str) or not isinstance(v, str | None)]
    if not isinstance(name_map, Mapping | None) or bad:
        raise TypeError(
            f"{caller}: name_map must map names to TensorFlow names (or None), got "
            f"{name_map!r}; pass e.g. {{'W': 'model/W', 'global_step': None}}."
        )
    variables = variable_names(state.params)
    trained = _var_list.select(caller, state.params, var_list)
    items = []
    for i, v in enumerate(variables):
        name = names.get(v, v)
        items.append(_Item(v, name, -1, i))
        for s, (suffix, _, _) in enumerate(slots):
            key = f"{name}/{suffix}"
            if name is not None and trained[i]:
                items.append(_Item(key, names.get(key, key), s, i))
    if isinstance(optimizer, AdamOptimizer):
        items += [_Item(k, names.get(k, k), -1, -1) for k in _BETA_POWERS]
    items.append(_Item("global_step", names.get("global_step", "global_step"), -1, -1))
    keys = [item.key for item in items]
    unknown = [f"{k!r}{_checks.did_you_mean(k, keys)}" for k in names if k not in keys]
    if unknown:
        raise ValueError(
            f"{caller}: name_map has keys that name nothing in the state: "
            f"{', '.join(unknown)}; its keys are the names funcgrad gives, here "
            f"{keys[:8]}{' ...' if len(keys) > 8 else ''} (a slot's from its variable's "
            "mapped name)."
        )
    if any(item.name == "" for item in items):
        raise ValueError(
            f"{caller}: a TensorFlow name is empty (fg.train.variable_names names a bare "
            "array of params ''); name it with name_map={'': 'W'}, or pass params as a "
            "dict, {'W': w}."
        )
    return items


def _prefix(caller: str, path: str | os.PathLike[str]) -> str:
    """The checkpoint prefix ``path`` means: a prefix, a directory (its latest checkpoint),
    or a path to the ``.index`` / ``.data-*`` / ``.meta`` file of a prefix."""
    path = os.fspath(path)
    if os.path.isdir(path):
        latest = _tf_bundle.latest_checkpoint(caller, path)
        if latest is None:
            raise FileNotFoundError(
                f"{caller}: the directory {path} has no 'checkpoint' file naming a checkpoint "
                "in it; pass the checkpoint's prefix, e.g. 'train/model.ckpt-1000'."
            )
        return latest
    path = re.sub(r"\.(index|meta|data-\d{5}-of-\d{5})$", "", path)
    if _tf_bundle.exists(path):
        return path
    if os.path.isfile(path):
        raise ValueError(
            f"{caller}: {path} is one file, not the prefix of a V2 checkpoint "
            "(TensorFlow's V1 format or no checkpoint at all); re-save it in TensorFlow "
            "with tf.compat.v1.train.Saver() (V2, the default) and pass that prefix."
        )
    raise FileNotFoundError(
        f"{caller}: no checkpoint at {path} ({path}.index does not exist); pass the "
        "prefix tf.train.Saver.save returned, e.g. 'train/model.ckpt-1000'."
    )


def _power(beta: float, n: int) -> np.float32:
    """``beta ** n`` as TensorFlow's ``beta1_power`` holds it: float32 ``beta``, multiplied
    ``n`` times in float32 (not ``np.float32(beta) ** n``, which rounds differently)."""
    power, b = np.float32(1.0), np.float32(beta)
    while n > 0 and power != 0:
        chunk = min(n, 1 << 20)
        power = np.multiply.accumulate(np.concatenate([[power], np.full(chunk, b)]))[-1]
        n -= chunk
    return np.float32(power)


def _adam_step(powers: list[float], betas: list[float], global_step: int) -> int | None:
    """funcgrad's Adam step ``t`` from TensorFlow's ``beta_power = beta ** (t + 1)``.

    ``global_step`` when it gives both powers exactly (a ``minimize(global_step=...)``
    run); else the count each power's logarithm gives — exact while ``beta1_power`` is a
    normal float32, within one after (when ``1 - beta2 ** t`` is 1 in float32 anyway).
    Once both powers are 0, every ``t`` past that gives the same numbers.  ``None`` when
    the powers do not come from these betas (not in ``(0, beta]``, or the two counts
    disagree).
    """
    if all(_power(b, global_step + 1) == p for b, p in zip(betas, powers, strict=True)):
        return global_step
    tiny = float(np.finfo(np.float32).tiny)
    pairs = [(p, float(np.float32(b))) for p, b in zip(powers, betas, strict=True)]
    if any(not 0 <= p <= b for p, b in pairs):
        return None
    counts = [round(math.log(p) / math.log(b)) - 1 for p, b in pairs if 0 < b < 1 and p >= tiny]
    if len(counts) == 2 and abs(counts[0] - counts[1]) > 1 + counts[0] // 1000:
        return None
    if counts:
        return counts[0]
    past = [math.ceil(math.log(tiny) / math.log(b)) for _, b in pairs if 0 < b < 1]
    return max(global_step, *past)


def _describe(dtype: Any, shape: tuple[int, ...]) -> str:
    return f"{np.dtype(dtype).name}{list(shape)}"


def _read_all(
    caller: str, reader: _tf_bundle.BundleReader, wanted: list[tuple[str, Any]]
) -> dict[str, np.ndarray]:
    """``{name: value}`` for each ``(name, like)``: the checkpoint's value of ``like``'s
    dtype and shape (any integer scalar where ``like`` is ``None``: ``global_step``).
    Every name missing or of another dtype or shape is reported in one ``ValueError``."""
    missing, wrong, out = [], [], {}
    found = list(reader.entries)
    claimed = {name for name, _ in wanted}
    unclaimed = [f for f in found if f not in claimed]
    for name, like in wanted:
        entry = reader.entries.get(name)
        if entry is None:
            scoped = [f for f in unclaimed if f.endswith("/" + name)]
            hint = f" (did you mean {scoped[0]!r}?)" if scoped else ""
            missing.append(f"{name!r}{hint or _checks.did_you_mean(name, unclaimed)}")
            continue
        dtype = _tf_bundle.DTYPES.get(entry.dtype)
        if like is None:
            ok = dtype is not None and dtype.kind in "iu" and entry.shape == ()
            want = "an integer scalar"
        else:
            ok = dtype == np.dtype(jnp.result_type(like)) and entry.shape == np.shape(like)
            want = _describe(jnp.result_type(like), np.shape(like))
        if not ok:
            got = _describe(dtype, entry.shape) if dtype else f"a tensor of type {entry.dtype}"
            wrong.append(f"{name!r} is {got} in the checkpoint, {want} in the state")
            continue
        out[name] = reader.read(name)
    problems = []
    if missing:
        problems.append(
            f"{reader.prefix} lacks {', '.join(missing)} (it holds {len(found)} names: "
            f"{found[:6]}{' ...' if len(found) > 6 else ''}); map the names with name_map "
            "(e.g. {'W/Adam': 'train/W/Adam'}; None keeps the state's value), or pass "
            "var_list=[the variables TensorFlow trained] when some had no optimizer slots"
        )
    if wrong:
        problems.append(
            f"{'; '.join(wrong)}; build the params with the shapes and dtypes the "
            "TensorFlow run saved (its Saver restores only those), then optimizer.init"
        )
    if problems:
        raise ValueError(f"{caller}: {'; and '.join(problems)}.")
    return out


def _place(value: np.ndarray, like: Any) -> jax.Array:
    """``value`` as a JAX array where ``like`` is (its sharding), in ``like``'s dtype."""
    array = jnp.asarray(value, jnp.result_type(like))
    if isinstance(like, jax.Array) and not isinstance(like, jax.core.Tracer):
        return jax.device_put(array, like.sharding)
    return array


def restore_tf_checkpoint(
    path: str | os.PathLike[str],
    state: TrainState,
    optimizer: Optimizer,
    name_map: Mapping[str, str | None] | None = None,
    var_list: VarList = None,
) -> TrainState:
    """The ``TrainState`` a TensorFlow 1.x ``tf.train.Saver`` checkpoint holds.

    Reads the variables by the names :func:`~funcgrad.train.variable_names` gives, the
    optimizer's slots by TensorFlow's names (see the module docstring: ``W/Adam``,
    ``W/Momentum``, ``W/RMSProp_1``, ...), Adam's ``beta1_power`` / ``beta2_power``, and
    ``global_step``, into a new state shaped like ``state`` (whose values are not
    used; ``state`` is not changed).  Names the checkpoint has beyond these are ignored,
    as TensorFlow's ``Saver.restore`` does.  Every name missing, and every value of
    another dtype or shape, is reported at once.  The hyperparameters (learning rate,
    betas, ...) come from ``optimizer``: TensorFlow keeps them in its graph, not in the
    checkpoint.  Not under ``jax.jit`` (it reads files).

    Args:
      path: the checkpoint prefix ``Saver.save`` returned (``train/model.ckpt-1000``),
        a path to its ``.index`` file, or a directory (the latest checkpoint its
        ``checkpoint`` file names).
      state: a template, ``optimizer.init(params)`` with the TF run's shapes and dtypes.
      optimizer: one of the nine ``fg.train`` TF1 optimizers, built with the TF run's
        arguments.
      name_map: funcgrad names to the checkpoint's, for what is named otherwise in
        TensorFlow: a variable (``{"W": "model/W"}``), a full slot or non-slot name —
        formed from the mapped variable name — (``{"W/Adam": "W/Adam_2"}`` for a second
        optimizer in the graph, ``{"W/Momentum": "train/W/Momentum"}`` for a
        ``variable_scope``, ``{"beta1_power": "train/beta1_power"}``).  ``None`` as a
        value keeps the state's value (``{"global_step": None}`` when the run had none).
      var_list: the variables TensorFlow trained, as ``minimize``'s ``var_list``
        (names, a predicate or a mask): TensorFlow gives the others no slots, so their
        slots keep the state's values.  ``None``: all.

    Returns:
      The restored ``TrainState``: params, slots and ``global_step`` from the
      checkpoint, each array where ``state``'s is (same sharding).

    Raises:
      FileNotFoundError: there is no checkpoint at ``path``.
      ValueError: names are missing, or have another dtype or shape (one message lists
        them all, with close names the checkpoint has); the file is damaged or not a
        checkpoint (every CRC32C is checked); Adam's powers do not come from the
        optimizer's betas; ``global_step`` exceeds int32; ``name_map`` names nothing.
      TypeError: ``optimizer`` is not one of the nine TF1 optimizers (a plain
        ``fg.train.Optimizer``, a wrapped one, a ``LossScaleOptimizer``: pass the
        optimizer it wraps), or ``state`` is not a ``TrainState``.

    Example:
      >>> import tempfile
      >>> opt = fg.train.MomentumOptimizer(0.1, momentum=0.9)
      >>> state, _ = opt.minimize(lambda p: jnp.sum(p["W"] ** 2), opt.init({"W": jnp.ones(2)}))
      >>> prefix = fg.train.save_tf_checkpoint(tempfile.mkdtemp() + "/model.ckpt-1", state, opt)
      >>> restored = fg.train.restore_tf_checkpoint(prefix, opt.init({"W": jnp.zeros(2)}), opt)
      >>> restored.params["W"], int(restored.global_step)
      (Array([0.8, 0.8], dtype=float32), 1)
    """
    caller = "fg.train.restore_tf_checkpoint(path, state, optimizer)"
    items = _plan(caller, state, optimizer, name_map, var_list)
    prefix = _prefix(caller, path)
    slots = _slots(caller, optimizer)
    leaves, treedef = jax.tree.flatten(state.params)
    inner = state.opt_state.inner_state
    slot_leaves = [jax.tree.leaves(_get(inner, at)) for _, at, _ in slots]

    def like(item: _Item) -> Any:
        if item.slot >= 0:
            return slot_leaves[item.slot][item.leaf]
        if item.leaf >= 0:
            return leaves[item.leaf]
        return None if item.key == "global_step" else np.float32(0)  # beta1/2_power

    wanted = [(i.name, like(i)) for i in items if i.name is not None]
    try:
        values = _read_all(caller, _tf_bundle.BundleReader(prefix), wanted)
    except _tf_bundle.CheckpointFormatError as error:  # a damaged file: say who read it
        raise _tf_bundle.CheckpointFormatError(f"{caller}: {error}") from None
    global_step = int(state.global_step)
    for item in items:
        if item.name is None:
            continue
        value = values[item.name]
        if item.key == "global_step":
            global_step = int(value)
            if not 0 <= global_step <= _INT32_MAX:
                raise ValueError(
                    f"{caller}: {item.name!r} is {global_step}, outside int32 (funcgrad's "
                    "global_step); restore with name_map={'global_step': None} and set it."
                )
        elif item.slot >= 0:
            sign = slots[item.slot][2]
            slot_leaves[item.slot][item.leaf] = _place(sign * value, like(item))
        elif item.leaf >= 0:
            leaves[item.leaf] = _place(value, leaves[item.leaf])
    for (_, at, _), restored in zip(slots, slot_leaves, strict=True):
        inner = _put(inner, at, jax.tree.unflatten(jax.tree.structure(_get(inner, at)), restored))
    if isinstance(optimizer, AdamOptimizer):
        inner = _restore_adam_step(caller, items, values, optimizer, inner, global_step)
    opt_state = state.opt_state._replace(inner_state=inner)
    if opt_state.step is not None:  # a schedule's own update count follows global_step
        opt_state = opt_state._replace(step=jnp.asarray(global_step, opt_state.step.dtype))
    return TrainState(
        jax.tree.unflatten(treedef, leaves),
        opt_state,
        jnp.asarray(global_step, state.global_step.dtype),
    )


def _restore_adam_step(
    caller: str,
    items: list[_Item],
    values: dict[str, np.ndarray],
    optimizer: Optimizer,
    inner: Any,
    global_step: int,
) -> Any:
    names = {item.key: item.name for item in items}
    if any(names[k] is None for k in _BETA_POWERS):
        return inner  # name_map keeps the state's step count
    powers = [float(values[str(names[k])]) for k in _BETA_POWERS]
    betas = [optimizer.hyperparameters[k] for k in ("beta1", "beta2")]  # type: ignore[attr-defined]
    step = _adam_step(powers, betas, global_step)
    if step is None:
        raise ValueError(
            f"{caller}: beta1_power={powers[0]} and beta2_power={powers[1]} are not powers "
            f"of this optimizer's beta1={betas[0]} and beta2={betas[1]}; build "
            "fg.train.AdamOptimizer with the beta1 and beta2 of the TensorFlow run."
        )
    return _put(inner, (0, "step"), jnp.asarray(step, _get(inner, (0, "step")).dtype))


def save_tf_checkpoint(
    path: str | os.PathLike[str],
    state: TrainState,
    optimizer: Optimizer,
    *,
    var_list: VarList = None,
    name_map: Mapping[str, str | None] | None = None,
) -> str:
    """Write ``state`` as a TensorFlow 1.x ``tf.train.Saver`` checkpoint at ``path``.

    Writes ``path.index`` and ``path.data-00000-of-00001`` — what a ``Saver`` writes,
    byte for byte, for the same values — with the variables, the optimizer's slots and
    ``global_step`` (int64) under the names :func:`restore_tf_checkpoint` reads, then
    makes it the latest checkpoint of the ``checkpoint`` file beside it.  In TensorFlow,
    rebuild the graph and ``tf.compat.v1.train.Saver().restore(sess, path)`` (no
    ``.meta`` file is written, so not ``import_meta_graph``); a graph with other
    variables restores with ``Saver(var_list=[...])``.  Files are written under temporary
    names and renamed into place, so a crash leaves no half-written checkpoint.

    Args:
      path: the checkpoint prefix to write, e.g. ``"train/model.ckpt-1000"`` (no step
        is appended); its directory is created if missing.
      state: the ``TrainState`` to save.
      optimizer: the TF1 optimizer that made ``state``.
      name_map: funcgrad names to the names the TensorFlow graph uses, as in
        :func:`restore_tf_checkpoint`; ``None`` as a value leaves that value out.
      var_list: the variables whose slots to write (TensorFlow's graph has slots only
        for the variables it trains); ``None``: all.

    Returns:
      ``path``, as ``Saver.save`` returns it.

    Raises:
      ValueError: two values map to one TensorFlow name, ``path`` is a directory, or
        ``global_step`` is negative; as :func:`restore_tf_checkpoint` for ``name_map``.
      TypeError: as :func:`restore_tf_checkpoint`.

    Example:
      >>> import tempfile
      >>> opt = fg.train.AdamOptimizer(0.1)
      >>> state, _ = opt.minimize(lambda p: jnp.sum(p["W"] ** 2), opt.init({"W": jnp.ones(2)}))
      >>> prefix = fg.train.save_tf_checkpoint(tempfile.mkdtemp() + "/model.ckpt-1", state, opt)
      >>> prefix.endswith("model.ckpt-1")
      True
    """
    caller = "fg.train.save_tf_checkpoint(path, state, optimizer)"
    items = _plan(caller, state, optimizer, name_map, var_list)
    prefix = os.fspath(path)
    if os.path.isdir(prefix) or not os.path.basename(prefix):
        raise ValueError(
            f"{caller}: path {prefix!r} is a directory; pass a prefix in it, e.g. "
            f"{os.path.join(prefix, 'model.ckpt-' + str(int(state.global_step)))!r}."
        )
    slots = _slots(caller, optimizer)
    leaves = jax.tree.leaves(state.params)
    inner = state.opt_state.inner_state
    slot_leaves = [jax.tree.leaves(_get(inner, at)) for _, at, _ in slots]
    global_step = int(state.global_step)
    if global_step < 0:
        raise ValueError(f"{caller}: state.global_step is {global_step}; it counts steps from 0.")
    tensors: dict[str, np.ndarray] = {}
    clashes = []
    for item in items:
        if item.name is None:
            continue
        if item.name in tensors:
            clashes.append(item.name)
        if item.slot >= 0:
            tensors[item.name] = slots[item.slot][2] * np.asarray(slot_leaves[item.slot][item.leaf])
        elif item.leaf >= 0:
            tensors[item.name] = np.asarray(leaves[item.leaf])
        elif item.key == "global_step":
            tensors[item.name] = np.asarray(global_step, np.int64)
        else:  # beta1_power, beta2_power
            beta = optimizer.hyperparameters[item.key[:5]]  # type: ignore[attr-defined]
            tensors[item.name] = np.asarray(_power(beta, int(_get(inner, (0, "step"))) + 1))
    if clashes:
        raise ValueError(
            f"{caller}: name_map gives {sorted(set(clashes))} to two values each; nothing "
            "was written — give each value its own TensorFlow name."
        )
    unstorable = [f"{n!r} is {a.dtype}" for n, a in tensors.items() if a.dtype not in _STORABLE]
    if unstorable:
        raise TypeError(
            f"{caller}: {', '.join(unstorable)}, which a TensorFlow checkpoint does not hold; "
            "nothing was written — cast the params to a float, integer or bool dtype."
        )
    try:
        _tf_bundle.write_bundle(prefix, tensors)
        _tf_bundle.write_checkpoint_state(prefix)
    except _tf_bundle.CheckpointFormatError as error:  # a directory where a file goes
        raise _tf_bundle.CheckpointFormatError(f"{caller}: {error}") from None
    return prefix
