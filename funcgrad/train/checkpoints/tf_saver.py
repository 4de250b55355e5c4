"""Resume a TensorFlow 1.x run: ``tf.train.Saver`` checkpoints to and from a ``TrainState``.

A TF1 program that trains with the ``tf.train`` optimizers and saves with
``tf.compat.v1.train.Saver`` keeps, under TensorFlow's names, what a funcgrad
``TrainState`` holds: the variables, the optimizer's slot variables (``W/Adam``,
``W/Momentum``, ...), a dynamic loss scale and ``global_step`` — and beside it what an
``EmaState`` holds (``W/ExponentialMovingAverage``) and the graph's other variables
(a learning-rate ``Variable``), passed as ``ema_state`` and ``extras``.  An
``OptimizerGroup`` is its optimizers' names together, numbered as TensorFlow numbers
them (``funcgrad.train.checkpoints._tf_layout`` says how).  :func:`restore_tf_checkpoint`
reads them into a state; :func:`save_tf_checkpoint` writes a state for TensorFlow.
Continued training gives TensorFlow's numbers (to float32 rounding).  The files are
read and written by ``funcgrad.train.checkpoints._tf_bundle``, with NumPy (and
``google-crc32c`` for the checksums): TensorFlow is not needed; by every process of a
``jax.distributed`` job together (``_tf_job``, ``_tf_placement``).  Both stream: a restore
places each tensor before it reads the next, a save copies one at a time to the host.

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

A second optimizer of one kind (an ``OptimizerGroup``'s) numbers on: ``v/Adam_2`` and
``v/Adam_3`` where it also trains ``v``, ``beta1_power_1`` and ``beta2_power_1``.  A
``LossScaleOptimizer`` with ``dynamic=True`` adds ``current_loss_scale`` (float32) and
``good_steps`` (int64 in TensorFlow, int32 here); a ``MovingAverageOptimizer`` adds
``v/ExponentialMovingAverage`` for each variable its wrapped optimizer trains.

Where funcgrad's state differs from TensorFlow's variables: RMSProp's momentum is held
with the opposite sign (the learning rate's sign is applied before it); Adam keeps
TensorFlow's float32 products ``beta1_power`` / ``beta2_power`` as they are, and a step
count ``t`` besides, recovered from them (``beta1 ** (t + 1)``); the learning
rate and every other hyperparameter are not in a TensorFlow checkpoint, so they come
from ``optimizer`` (build it with the TF run's arguments).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from funcgrad._types import get_path
from funcgrad._types import put_path
from funcgrad.train._var_list import VarList
from funcgrad.train.checkpoints import _tf_bundle
from funcgrad.train.checkpoints import _tf_job
from funcgrad.train.checkpoints import _tf_layout
from funcgrad.train.checkpoints import _tf_placement
from funcgrad.train.checkpoints import _tf_slices
from funcgrad.train.checkpoints._tf_layout import Item
from funcgrad.train.checkpoints._tf_layout import View
from funcgrad.train.moving_averages import EmaState
from funcgrad.train.state import TrainState

__all__ = ["restore_tf_checkpoint", "save_tf_checkpoint"]

_STORABLE = set(_tf_bundle.DTYPES.values())
_INT32_MAX = 2**31 - 1
_GLOBAL_STEP_DTYPES = (np.dtype(np.int32), np.dtype(np.int64))


def _place(value: Any, like: Any) -> jax.Array:
    """``value`` (read, or computed) as a JAX array of ``like``'s dtype, placed and
    committed as ``like`` is: on its sharding where ``like`` is a committed array, else
    uncommitted as a fresh ``init``'s arrays are, so that a jitted step compiles once for
    a fresh state, a restored one and their successors.  A value read into ``like``'s
    layout already (spread over the processes of a job) is returned as it is."""
    if isinstance(value, jax.Array):
        return value
    host = np.asarray(value, jnp.result_type(like))  # no copy: read buffers are aligned
    if isinstance(like, jax.Array) and not isinstance(like, jax.core.Tracer) and like.committed:
        return jax.device_put(host, like.sharding)
    return jax.device_put(host)


def restore_tf_checkpoint(
    path: str | os.PathLike[str],
    state: TrainState,
    optimizer: Any,
    name_map: Mapping[str, str | None] | None = None,
    var_list: VarList = None,
    *,
    ema_state: EmaState | None = None,
    extras: Mapping[str, Any] | None = None,
) -> Any:
    """The ``TrainState`` a TensorFlow 1.x ``tf.train.Saver`` checkpoint holds.

    Reads the variables by the names :func:`~funcgrad.train.variable_names` gives, the
    optimizer's slots by TensorFlow's names (see the module docstring: ``W/Adam``,
    ``W/Momentum``, ``W/RMSProp_1``, ...; a second optimizer's ``W/Adam_2``,
    ``beta1_power_1``), Adam's ``beta1_power`` / ``beta2_power``, a dynamic loss
    scale's ``current_loss_scale`` / ``good_steps``, ``global_step`` (int32 or int64,
    as the graph made it), and on request a moving average's shadows
    (``W/ExponentialMovingAverage``) and other variables of the graph (``extras``),
    into new values shaped like the templates given (whose values are not used; nothing
    given is changed).  Names the checkpoint has beyond these are ignored, as
    TensorFlow's ``Saver.restore`` does.  Every name missing, and every value of another
    dtype or shape, is reported at once.  The hyperparameters (learning rate, betas,
    ...) come from ``optimizer``: TensorFlow keeps them in its graph, not in the
    checkpoint.  Leaves of ``params`` that are no variables (integer or boolean arrays,
    functions) are in no checkpoint and keep the state's values; read an integer
    variable of the graph with ``extras``.  Not under ``jax.jit`` (it reads files).

    Args:
      path: the checkpoint prefix ``Saver.save`` returned (``train/model.ckpt-1000``),
        a path to its ``.index`` file, or a directory (the latest checkpoint its
        ``checkpoint`` file names).
      state: a template, ``optimizer.init(params)`` with the TF run's shapes and dtypes.
      optimizer: what made ``state``: one of the nine ``fg.train`` TF1 optimizers, built
        with the TF run's arguments; an ``fg.train.OptimizerGroup`` of them, listed in
        the order the TensorFlow program built their train ops (which numbers their
        slots); a ``MovingAverageOptimizer`` over a TF1 optimizer (its averages are
        in the state); a ``LossScaleOptimizer`` over one of these (or over an
        optimizer of a group); or what ``fg.train.optimize_loss`` returns, whose names
        are under its scope (``OptimizeLoss/W/Adam``, ``OptimizeLoss/learning_rate``)
        and whose ``variables`` are the default ``var_list``.
      name_map: funcgrad names to the checkpoint's, for what is named otherwise in
        TensorFlow: a variable (``{"W": "model/W"}``), a full slot or non-slot name —
        formed from the mapped variable name — (``{"W/Adam": "W/Adam_G"}`` for an
        optimizer built with ``name="Adam_G"``, ``{"W/Momentum": "train/W/Momentum"}``
        for a ``variable_scope``, ``{"beta1_power": "train/beta1_power"}``), a shadow
        (``{"W/ExponentialMovingAverage": "W/ema"}``).  ``None`` as a value keeps the
        state's value (``{"global_step": None}`` when the run had none).
      var_list: the variables TensorFlow trained, as ``minimize``'s ``var_list``
        (names, a predicate or a mask): TensorFlow gives the others no slots, so their
        slots keep the state's values.  ``None``: all.  Not with a group, whose
        optimizers have their own.
      ema_state: a template of the moving averages, ``ema.init(params)`` (averages of
        ``params`` or of part of it: each average is read as
        ``<its name>/ExponentialMovingAverage``).
      extras: other variables of the graph to read, TensorFlow name to a template array
        of the dtype and shape saved (``{"learning_rate": jnp.float32(0)}``).  A JAX
        template reads a JAX array where it is; any other (a NumPy array or scalar, a
        Python number, of the dtype ``save_tf_checkpoint`` gives it) a NumPy array, so
        ``np.int64(0)`` reads an int64 counter whether ``jax_enable_x64`` is on or off.

    Returns:
      The restored ``TrainState``: params, slots, loss scale and ``global_step`` from
      the checkpoint, each array where ``state``'s is (same sharding, committed or not as
      it is, so a jitted step compiled for ``state`` serves it).  With
      ``ema_state`` or ``extras``: a tuple ``(state, ema_state, extras)`` of the
      restored ``TrainState``, ``EmaState`` (``None`` if not asked) and dict of arrays
      (so the annotation is ``Any``).

    Raises:
      FileNotFoundError: there is no checkpoint at ``path``.
      ValueError: names are missing, or have another dtype or shape (one message lists
        them all, with close names the checkpoint has, and names ``jax_enable_x64`` when
        the checkpoint's dtype is one JAX holds only with it); the file is damaged or not a
        checkpoint (every CRC32C is checked); Adam's powers do not come from the
        optimizer's betas; ``global_step`` exceeds int32; ``name_map`` names nothing;
        two values have one TensorFlow name (two leaves of ``params`` with one path
        name, or a ``name_map`` giving one name twice); ``ema_state`` is zero-debiased,
        or given with a ``MovingAverageOptimizer`` (its state holds the averages);
        ``name_map`` keeps one of Adam's two powers and reads the other.
      TypeError: ``optimizer`` is not one of the supported ones (a plain
        ``fg.train.Optimizer`` of an optax transformation, a wrapped one), ``state`` is
        not a ``TrainState``, ``ema_state`` not an ``EmaState``, or ``extras`` does not
        map names to arrays.

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
    items, parts = _tf_layout.plan(caller, state, optimizer, name_map, var_list, ema_state, extras)
    prefix = _tf_layout.checkpoint_prefix(caller, path)
    view = View(state, parts, ema_state, extras)

    def like(item: Item) -> Any:  # None: any integer scalar
        return None if item.what in ("global_step", "good_steps") else view.held(item)

    named = [i for i in items if i.name is not None]
    wanted = [(i.name, like(i)) for i in named if i.name is not None]  # all: named has names
    values = _tf_layout.read_each(caller, prefix, wanted, _tf_placement.read)
    variables = list(view.flat.variables)
    averages = list(view.averages.variables) if view.averages is not None else []
    slots = [[list(leaves) for leaves, _ in part_slots] for part_slots in view.slots]
    non_slots: dict[tuple[int, int], jax.Array] = {}
    counts = {"global_step": int(state.global_step)}
    restored_extras, scale = {}, None
    rates: dict[int, jax.Array] = {}
    for item, (_, value) in zip(named, values, strict=True):  # each placed before the next read
        if item.what == "variable":
            variables[item.leaf] = _place(value, variables[item.leaf])
        elif item.what == "slot":
            leaves, i = slots[item.part][item.number], view.flat.at[item.leaf]
            leaves[i] = _place(value, leaves[i])
        elif item.what == "non_slot":
            non_slots[item.part, item.number] = _place(value, view.value(item))
        elif item.what in ("global_step", "good_steps"):
            counts[item.what] = _count(caller, item, value)
        elif item.what == "learning_rate":  # optimize_loss's variable: a held rate is set
            if view.held_rate(item.part) is not None:
                rates[item.part] = _place(value, view.held_rate(item.part))
            else:  # the rate a learning_rate_decay_fn decays: the optimizer's own
                _tf_layout.check_decayed_rate(caller, item, value, parts[item.part])
        elif item.what == "loss_scale":
            scale = _place(value, view.value(item))
        elif item.what == "average":
            averages[item.leaf] = _place(value, averages[item.leaf])
        else:  # an extra: a JAX array for a JAX template, else the NumPy array read
            like = view.value(item)
            restored_extras[item.key] = (
                _place(value, like) if isinstance(like, jax.Array) else value
            )
        del value  # the next tensor is read while this one's memory is free
    opt_state = state.opt_state
    for p, part in enumerate(parts):
        trees = {
            key: jax.tree.unflatten(treedef, leaves)
            for (key, _), leaves, (_, treedef) in zip(
                part.kind.slots, slots[p], view.slots[p], strict=True
            )
        }
        read = {
            n: non_slots[p, k] for k, n in enumerate(part.kind.non_slots) if (p, k) in non_slots
        }
        own = get_path(opt_state, part.at)
        rate_state = part.optimizer.with_tf_values(caller, own, trees, read, counts["global_step"])
        if p in rates:
            rate_state = rate_state._replace(learning_rate=rates[p])
        if rate_state.step is not None:  # a schedule's own update count follows global_step
            count = _place(counts["global_step"], rate_state.step)
            rate_state = rate_state._replace(step=count)
        opt_state = put_path(opt_state, part.at, rate_state)
    if scale is not None:  # each read on its own: name_map may keep either as it is
        opt_state = opt_state._replace(loss_scale=scale)
    if "good_steps" in counts:
        good_steps = _place(counts["good_steps"], opt_state.good_steps)
        opt_state = opt_state._replace(good_steps=good_steps)
    params = view.flat.replaced(variables)
    global_step = _place(counts["global_step"], state.global_step)
    restored = TrainState(params, opt_state, global_step)
    ema = EmaState(view.averages.replaced(averages)) if view.averages is not None else None
    if view.averages_at is not None:  # a MovingAverageOptimizer's, in the state
        restored = restored._replace(opt_state=put_path(restored.opt_state, view.averages_at, ema))
        ema = None
    if ema_state is None and extras is None:
        return restored
    return restored, ema, restored_extras


def _count(caller: str, item: Item, value: np.ndarray) -> int:
    """A step count of the checkpoint, checked to fit funcgrad's int32."""
    count = int(value)
    if not 0 <= count <= _INT32_MAX:
        raise ValueError(
            f"{caller}: {item.name!r} is {count}, outside int32 (funcgrad's step counts); "
            f"restore with name_map={{{item.key!r}: None}} and set it."
        )
    return count


def save_tf_checkpoint(
    path: str | os.PathLike[str],
    state: TrainState,
    optimizer: Any,
    *,
    var_list: VarList = None,
    name_map: Mapping[str, str | None] | None = None,
    ema_state: EmaState | None = None,
    extras: Mapping[str, Any] | None = None,
    global_step_dtype: Any = np.int64,
    partitions: Mapping[str, int] | None = None,
) -> str:
    """Write ``state`` as a TensorFlow 1.x ``tf.train.Saver`` checkpoint at ``path``.

    Writes ``path.index`` and ``path.data-00000-of-00001`` — what a ``Saver`` writes,
    byte for byte, for the same values — with the variables, the optimizer's slots, a
    dynamic loss scale, ``global_step``, and on request a moving average's shadows and
    other variables of the graph, under the names :func:`restore_tf_checkpoint` reads,
    then makes it the latest checkpoint of the ``checkpoint`` file beside it.  In
    TensorFlow, rebuild the graph and ``tf.compat.v1.train.Saver().restore(sess, path)``
    (no ``.meta`` file is written, so not ``import_meta_graph``); TensorFlow's default
    ``Saver()`` restores every variable of the graph, so pass the moving average and
    the graph's other variables here, or restore with ``Saver(var_list=[...])``; an
    integer or boolean leaf of ``params`` is no variable and is not written (pass an
    integer variable of the graph in ``extras``).  Files are written under temporary
    names and renamed into place, so a crash leaves no half-written checkpoint; a second
    program saving the same ``path`` waits for this save, then saves whole after it.
    Under ``jax.distributed`` every process calls it, with the same arguments: each
    writes what it holds to a data file of its own, ``path.data-0000k-of-0000n``, and
    process 0 the index (TensorFlow's sharded format; ``docs/scale.md``, "Several
    hosts").

    Args:
      path: the checkpoint prefix to write, e.g. ``"train/model.ckpt-1000"`` (no step
        is appended); its directory is created if missing.
      state: the ``TrainState`` to save.
      optimizer: what made ``state``, as :func:`restore_tf_checkpoint` takes it.
      var_list: the variables whose slots to write (TensorFlow's graph has slots only
        for the variables it trains); ``None``: all.  Not with a group.
      name_map: funcgrad names to the names the TensorFlow graph uses, as in
        :func:`restore_tf_checkpoint`; ``None`` as a value leaves that value out.
      ema_state: the moving averages to write as ``<name>/ExponentialMovingAverage``.
      extras: other variables of the graph, TensorFlow name to array
        (``{"learning_rate": jnp.float32(0.1)}``), written in their own dtype (a NumPy
        int64 or float64 too, whether ``jax_enable_x64`` is on or off), a Python number
        in the dtype ``tf.Variable(number)`` gives it: ``bool``, ``int32`` (``int64``
        beyond it), ``float32``, ``complex128``.  The state's own values are written as
        JAX holds them.
      global_step_dtype: ``np.int64`` (``tf.train.get_or_create_global_step``'s) or
        ``np.int32`` (a graph's ``tf.Variable(0)``): TensorFlow restores only the dtype
        its graph has.
      partitions: TensorFlow names of variables its graph makes with
        ``tf.compat.v1.fixed_size_partitioner(n)``, to ``n``: each is written as its
        ``n`` slices along the first axis, and so are its slots and moving average, as
        a ``Saver`` writes a partitioned variable (:func:`restore_tf_checkpoint` reads
        them back into one array either way).

    Returns:
      ``path``, as ``Saver.save`` returns it.

    Raises:
      ValueError: two values have one TensorFlow name, a name starts with NUL or is
        not UTF-8 text, ``path`` is a directory, ``global_step`` is negative,
        ``global_step_dtype`` is not int32 or int64, a Python int of ``extras`` is beyond
        int64, or ``partitions`` names a tensor not saved or more parts than its rows; as
        :func:`restore_tf_checkpoint` for ``name_map``.
      TypeError: a value's dtype has no TensorFlow dtype, or ``partitions`` is no mapping
        of names to ints; as :func:`restore_tf_checkpoint`.
      RuntimeError: in a job, another process could not write its part (it raised its
        own error); nothing was saved.  In a job, a ``ValueError`` also where the
        processes save different states, or copies of a value each holds differ.

    Example:
      >>> import tempfile
      >>> opt = fg.train.AdamOptimizer(0.1)
      >>> state, _ = opt.minimize(lambda p: jnp.sum(p["W"] ** 2), opt.init({"W": jnp.ones(2)}))
      >>> prefix = fg.train.save_tf_checkpoint(tempfile.mkdtemp() + "/model.ckpt-1", state, opt)
      >>> prefix.endswith("model.ckpt-1")
      True
    """
    caller = "fg.train.save_tf_checkpoint(path, state, optimizer)"
    items, parts = _tf_layout.plan(caller, state, optimizer, name_map, var_list, ema_state, extras)
    prefix = os.fspath(path)
    if os.path.isdir(prefix) or not os.path.basename(prefix):
        raise ValueError(
            f"{caller}: path {prefix!r} is a directory; pass a prefix in it, e.g. "
            f"{os.path.join(prefix, 'model.ckpt-' + str(int(state.global_step)))!r}."
        )
    try:
        step_dtype = np.dtype(global_step_dtype)
    except TypeError:
        step_dtype = None
    if step_dtype not in _GLOBAL_STEP_DTYPES:
        raise ValueError(
            f"{caller}: global_step_dtype={global_step_dtype!r}; pass np.int64 (the dtype "
            "of tf.train.get_or_create_global_step) or np.int32 (a graph's tf.Variable(0))."
        )
    global_step = int(state.global_step)
    if global_step < 0:
        raise ValueError(f"{caller}: state.global_step is {global_step}; it counts steps from 0.")
    view = View(state, parts, ema_state, extras)
    dtypes = {"global_step": step_dtype, "good_steps": np.dtype(np.int64)}
    named = {item.name: item for item in items if item.name is not None}

    def stored_dtype(item: Item) -> np.dtype:
        return dtypes.get(item.what) or np.dtype(view.held(item).dtype)

    def tensor(item: Item) -> _tf_job.Tensor:  # made when written, one at a time
        return _tf_job.Tensor(view.held(item), lambda: view.value(item), dtypes.get(item.what))

    tensors = {name: tensor(item) for name, item in named.items()}
    stored = {name: stored_dtype(item) for name, item in named.items()}
    unstorable = [f"{n!r} is {dtype}" for n, dtype in stored.items() if dtype not in _STORABLE]
    if unstorable:
        raise TypeError(
            f"{caller}: {', '.join(unstorable)}, which a TensorFlow checkpoint does not hold; "
            "nothing was written — cast the params to a float, integer or bool dtype."
        )
    shapes = {name: np.shape(view.held(item)) for name, item in named.items()}
    sliced = _tf_slices.expand(caller, partitions or {}, shapes)
    try:
        _tf_job.write_bundle(prefix, tensors, sliced, latest=True, caller=caller)
    except _tf_bundle.CheckpointFormatError as error:  # a directory where a file goes
        raise _tf_bundle.CheckpointFormatError(f"{caller}: {error}") from None
    return prefix
