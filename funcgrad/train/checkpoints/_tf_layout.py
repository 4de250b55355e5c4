"""Which value of a ``TrainState`` is which variable of a TensorFlow 1.x checkpoint.

Design note
-----------
What it follows: the names TensorFlow 2.21's ``tf.compat.v1.train`` gives the variables
a TF1 program saves with ``tf.compat.v1.train.Saver()`` (checked by listing
``tf.compat.v1.train.list_variables`` of checkpoints of such graphs):

* a slot variable is ``<variable>/<optimizer name>``, made unique in the graph:
  Adam's ``m`` and ``v`` of ``W`` are ``W/Adam`` and ``W/Adam_1``; a second Adam that
  also trains ``W`` has ``W/Adam_2`` and ``W/Adam_3`` (one that trains other
  variables only has ``D/Adam``, ``D/Adam_1`` there);
* a non-slot variable (Adam's ``beta1_power``) is unique in the graph: the second
  Adam's is ``beta1_power_1``;
* ``MixedPrecisionLossScaleOptimizer`` with a dynamic scale keeps ``current_loss_scale``
  (float32) and ``good_steps`` (int64), a second one ``current_loss_scale_1``, ...; a
  fixed scale keeps nothing;
* ``ExponentialMovingAverage.apply`` makes ``<variable>/ExponentialMovingAverage``, and
  so does tf.contrib.opt's ``MovingAverageOptimizer``, whose averages funcgrad holds in
  the state (:func:`held_averages`);
* ``tf.contrib.layers.optimize_loss`` builds its optimizer in a variable scope
  (``OptimizeLoss``, or its ``name``): the slots are ``OptimizeLoss/W/Adam``, the non-slot
  variables ``OptimizeLoss/beta1_power``, and a float learning rate is the variable
  ``OptimizeLoss/learning_rate``;
* ``global_step`` is whatever integer variable the graph made (int64 from
  ``get_or_create_global_step``, int32 from ``tf.Variable(0)``).

What it assumes: the optimizers of an ``OptimizerGroup`` are listed in the order the
TensorFlow program built their train ops (``minimize`` / ``apply_gradients`` create
the slots, and so number them); each optimizer creates its slots variable by variable,
in the order of ``fg.train.variable_names``.  A ``name_map`` covers anything else.

:func:`plan` lists every value as an :class:`Item`; :class:`View` reads an item's value
from a state as TensorFlow holds it; :func:`read_each` checks the checkpoint's names,
dtypes and shapes, then reads its values one at a time.
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Callable
from collections.abc import Iterator
from collections.abc import Mapping
from typing import Any
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from funcgrad import _checks
from funcgrad._types import PyTree
from funcgrad._types import get_path
from funcgrad._types import is_array
from funcgrad.train import _var_list
from funcgrad.train._var_list import VarList
from funcgrad.train._variables import Flat
from funcgrad.train._variables import is_variable
from funcgrad.train.checkpoints import _tf_bundle
from funcgrad.train.group import OptimizerGroup
from funcgrad.train.moving_averages import EmaState
from funcgrad.train.names import variable_names
from funcgrad.train.optimizers.base import TF1Optimizer
from funcgrad.train.state import TrainState
from funcgrad.train.wrappers.loss_scale import LossScaleOptimizer
from funcgrad.train.wrappers.loss_scale import LossScaleState
from funcgrad.train.wrappers.moving_average_optimizer import MovingAverageOptimizer
from funcgrad.train.wrappers.moving_average_optimizer import MovingAverageState


class Kind(NamedTuple):
    """A TF1 optimizer's names, as it declares them: each slot's key and base name
    (TensorFlow names the slot ``v/<base>``, made unique in the graph as ``v/<base>_1``,
    ...), in TensorFlow's order of creation, and its non-slot variables."""

    slots: tuple[tuple[str, str], ...]
    non_slots: tuple[str, ...] = ()


#: TensorFlow's names of a dynamic loss scale and of a moving average's shadows.
_LOSS_SCALE = ("current_loss_scale", "good_steps")
_SHADOW = "ExponentialMovingAverage"


class Part(NamedTuple):
    """One TF1 optimizer of ``optimizer``: its kind, where its state is in
    ``state.opt_state`` (indices, field names and group names), which variables it has
    slots for."""

    optimizer: TF1Optimizer
    kind: Kind
    at: tuple[int | str, ...]
    trained: list[bool]
    #: Per variable, per slot: whether the variable has it.
    present: list[list[bool]]
    #: The variable scope of its slots and non-slots (``"OptimizeLoss/"``), or ``""``.
    scope: str = ""
    #: ``optimize_loss``'s float learning rate, the variable ``<scope>learning_rate``.
    rate: float | None = None


class Item(NamedTuple):
    """One value of the checkpoint under its TensorFlow name.

    ``key`` is the name before ``name_map`` (what its keys refer to), ``name`` after it
    (``None``: not in the checkpoint, the state's value is kept).  ``what`` says which
    value: ``"variable"``, ``"slot"``, ``"non_slot"``, ``"learning_rate"``,
    ``"global_step"``, ``"loss_scale"``, ``"good_steps"``, ``"average"`` or ``"extra"``;
    ``part`` and
    ``number`` say which optimizer and which of its slots or non-slots; ``leaf`` which
    variable (or average).
    """

    key: str
    name: str | None
    what: str
    part: int = -1
    number: int = -1
    leaf: int = -1


def _unsupported(caller: str, optimizer: Any) -> TypeError:
    return TypeError(
        f"{caller}: the optimizer, a {type(optimizer).__name__}, has no TensorFlow 1.x "
        "names for its state; the supported optimizers are fg.train's TF1 optimizers (every "
        "fg.train.TF1Optimizer: AdamOptimizer, AdamWeightDecayOptimizer, ...), an "
        "fg.train.OptimizerGroup of them, a MovingAverageOptimizer over one, a "
        "LossScaleOptimizer over one of these and fg.train.optimize_loss's over any of "
        "them — "
        "pass the one the TensorFlow run used, with its arguments."
    )


def _parts(
    caller: str, optimizer: Any, params: PyTree, var_list: VarList
) -> tuple[list[Part], LossScaleOptimizer | None]:
    """The TF1 optimizers ``optimizer`` is made of, and its loss scale if it has one."""
    scale: LossScaleOptimizer | None = None
    at: tuple[int | str, ...] = ()
    scope, rate = getattr(optimizer, "tf_scope", None), None
    if isinstance(scope, str):  # optimize_loss's: its optimizer's state, under a scope
        var_list = optimizer.variables if var_list is None else var_list
        rate, optimizer = optimizer.tf_learning_rate, optimizer.optimizer
    if isinstance(optimizer, LossScaleOptimizer):
        scale, optimizer, at = optimizer, optimizer.optimizer, ("inner_state",)
    if isinstance(optimizer, MovingAverageOptimizer):
        optimizer, at = optimizer.optimizer, (*at, "inner_state")
    if isinstance(getattr(optimizer, "group", None), OptimizerGroup):
        optimizer = optimizer.group  # one optimizer of a group: the state is the group's
    if isinstance(optimizer, OptimizerGroup):
        if var_list is not None:
            raise ValueError(
                f"{caller}: var_list={var_list!r} is given with an OptimizerGroup, whose "
                "optimizers each have their own var_list; leave var_list out."
            )
        members = [(getattr(m, "optimizer", m), (*at, n), m.var_list) for n, m in optimizer.items()]
    else:
        members = [(optimizer, at, var_list)]
    parts = []
    for member, where, chosen in members:
        trained = _var_list.select(caller, params, chosen)
        if not isinstance(member, TF1Optimizer):
            raise _unsupported(caller, member if scale is None else scale)
        parts.append(_tf1_part(member, where, trained, params))
    if isinstance(scope, str):
        parts = [part._replace(scope=f"{scope}/", rate=rate) for part in parts]
    return parts, scale


def _tf1_part(
    optimizer: TF1Optimizer, at: tuple[int | str, ...], trained: list[bool], params: PyTree
) -> Part:
    """The part of a ``TF1Optimizer``: the names it declares (the slots some variable has)."""
    per_var, non_slots = optimizer.tf_names(params)
    had = {k for mine in per_var for k, _ in mine}
    keys = [k for k in optimizer.slots if k in had]
    kind = Kind(tuple((k, optimizer.slots[k]) for k in keys), tuple(non_slots))
    present = [[k in dict(mine) for k in keys] for mine in per_var]
    return Part(optimizer, kind, at, trained, present)


def _check_state(caller: str, state: Any, optimizer: Any) -> None:
    if not isinstance(state, TrainState):
        raise TypeError(
            f"{caller}: state is a {type(state).__name__}, not a TrainState; pass "
            "optimizer.init(params) (for a restore, any state of the right shapes)."
        )
    expected: Any = jax.tree.structure(jax.eval_shape(lambda: optimizer.init(state.params)))
    if jax.tree.structure(TrainState(*state)) != expected:
        raise ValueError(
            f"{caller}: state.opt_state is not the state of this "
            f"{type(optimizer).__name__} ({jax.tree.structure(state.opt_state)}); pass "
            "the state optimizer.init(params) made or its minimize returned."
        )


def held_averages(opt_state: Any) -> tuple[tuple[str, ...], EmaState] | None:
    """Where a ``MovingAverageOptimizer``'s averages are in ``opt_state`` (under a loss
    scale or not), and they; ``None`` for the state of any other optimizer."""
    at: tuple[str, ...] = ()
    if isinstance(opt_state, LossScaleState):
        at, opt_state = ("inner_state",), opt_state.inner_state
    if isinstance(opt_state, MovingAverageState):
        return (*at, "ema_state"), opt_state.ema_state
    return None


def _check_ema_state(caller: str, ema_state: Any, held: Any) -> None:
    if ema_state is None:
        return
    if held is not None:
        raise ValueError(
            f"{caller}: ema_state is given, and the MovingAverageOptimizer's state holds "
            "its own averages under the same names (<variable>/ExponentialMovingAverage); "
            "leave ema_state out."
        )
    if not isinstance(ema_state, EmaState):
        raise TypeError(
            f"{caller}: ema_state is a {type(ema_state).__name__}, not an EmaState; pass "
            "what ema.init(params) or ema.apply returned."
        )
    if ema_state.local_step is not None:
        raise ValueError(
            f"{caller}: ema_state is of an ExponentialMovingAverage with zero_debias=True, "
            "which TensorFlow ignores for a variable's shadow (it keeps no debiasing state "
            "for one); build the average as the TensorFlow run did, without zero_debias."
        )


def _check_extras(caller: str, extras: Any) -> dict[str, Any]:
    if extras is None:
        return {}
    if not isinstance(extras, Mapping) or not all(
        isinstance(k, str) and is_array(v) for k, v in extras.items()
    ):
        raise TypeError(
            f"{caller}: extras must map TensorFlow names to arrays, got {extras!r}; pass "
            "e.g. extras={'learning_rate': jnp.float32(0.1)}."
        )
    huge = [f"{k!r} is {v}" for k, v in extras.items() if _python_dtype(v) == np.dtype(object)]
    if huge:
        raise ValueError(
            f"{caller}: in extras, {', '.join(huge)}, beyond int64, the widest integer of a "
            "TensorFlow checkpoint; pass it as a NumPy array of the graph variable's dtype."
        )
    return dict(extras)


def _python_dtype(value: Any) -> np.dtype | None:
    """The dtype ``tf.Variable(value)`` gives a Python number: bool, int32 (int64 beyond
    it; ``object`` beyond that, which no checkpoint holds), float32, complex128;
    ``None`` for anything else."""
    if isinstance(value, bool):
        return np.dtype(np.bool_)
    if isinstance(value, int):
        fits = [t for t in (np.int32, np.int64) if np.iinfo(t).min <= value <= np.iinfo(t).max]
        return np.dtype(fits[0] if fits else object)
    kinds = {float: np.float32, complex: np.complex128}
    return np.dtype(kinds[type(value)]) if type(value) in kinds else None


def _held(value: Any) -> Any:
    """An extra as the checkpoint holds it: a JAX array as it is, a NumPy array or scalar
    as a NumPy array of its own dtype (never through JAX, which without
    ``jax_enable_x64`` turns int64 into int32), a Python number as ``tf.Variable`` makes
    it (:func:`_python_dtype`)."""
    if isinstance(value, jax.Array):
        return value
    return np.asarray(value, _python_dtype(value))


def plan(
    caller: str,
    state: TrainState,
    optimizer: Any,
    name_map: Mapping[str, str | None] | None,
    var_list: VarList,
    ema_state: EmaState | None = None,
    extras: Mapping[str, Any] | None = None,
) -> tuple[list[Item], list[Part]]:
    """Every value the checkpoint holds for ``state``, by TensorFlow name, and the
    optimizers whose state they are."""
    if not isinstance(state, TrainState):
        _check_state(caller, state, optimizer)  # the TypeError, before params is read
    parts, scale = _parts(caller, optimizer, state.params, var_list)
    _check_state(caller, state, optimizer)
    held = held_averages(state.opt_state)
    _check_ema_state(caller, ema_state, held)
    averaged, shadows = None, ""  # ema_state's: every average, unscoped
    if held is not None:  # a MovingAverageOptimizer's: those trained, in optimize_loss's scope
        ema_state, shadows = held[1], parts[0].scope
        pairs = zip(variable_names(state.params), parts[0].trained, strict=True)
        averaged = {v for v, t in pairs if t}
    names = dict(name_map) if isinstance(name_map, Mapping) else {}
    bad = [k for k, v in names.items() if not isinstance(k, str) or not isinstance(v, str | None)]
    if not isinstance(name_map, Mapping | None) or bad:
        raise TypeError(
            f"{caller}: name_map must map names to TensorFlow names (or None), got "
            f"{name_map!r}; pass e.g. {{'W': 'model/W', 'global_step': None}}."
        )
    counts: dict[str, int] = {}

    def add(key: str, what: str, part: int = -1, number: int = -1, leaf: int = -1) -> None:
        items.append(Item(key, names.get(key, key), what, part, number, leaf))

    def unique(base: str) -> str:
        """TensorFlow's name for the next variable named ``base`` (``base_1``, ...)."""
        counts[base] = counts.get(base, 0) + 1
        return base if counts[base] == 1 else f"{base}_{counts[base] - 1}"

    items: list[Item] = []
    variables = variable_names(state.params)
    for i, v in enumerate(variables):
        add(v, "variable", leaf=i)
    for p, part in enumerate(parts):
        for i, v in enumerate(variables):
            name = names.get(v, v)
            for s, (_, base) in enumerate(part.kind.slots):
                if name is not None and part.trained[i] and part.present[i][s]:
                    add(unique(f"{part.scope}{name}/{base}"), "slot", p, s, i)
        for n, base in enumerate(part.kind.non_slots):
            add(unique(part.scope + base), "non_slot", p, n)
        if part.rate is not None:
            add(unique(f"{part.scope}learning_rate"), "learning_rate", p)
    add("global_step", "global_step")
    if scale is not None and scale.dynamic:
        add(unique(_LOSS_SCALE[0]), "loss_scale")
        add(unique(_LOSS_SCALE[1]), "good_steps")
    if ema_state is not None:
        for i, v in enumerate(variable_names(ema_state.average)):
            name = names.get(v, v)
            if name is not None and (averaged is None or v in averaged):
                add(f"{shadows}{name}/{_SHADOW}", "average", leaf=i)
    for k in _check_extras(caller, extras):
        items.append(Item(k, k, "extra"))
    _check_names(caller, items, names, state.params)
    return items, parts


def _check_names(
    caller: str, items: list[Item], names: Mapping[str, str | None], params: PyTree
) -> None:
    """Raise unless every ``name_map`` key names a value and every value has a name of
    its own that a checkpoint can hold."""
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
    unreadable = [
        repr(item.name)
        for item in items
        if item.name is not None and (item.name.startswith("\0") or not _is_utf8(item.name))
    ]
    if unreadable:
        raise ValueError(
            f"{caller}: the TensorFlow names {', '.join(unreadable)} start with NUL or are "
            "not UTF-8 text (a lone surrogate), which a checkpoint cannot hold or read "
            "back; map them to plain names with name_map (e.g. {'W': 'model/W'})."
        )
    paths = [
        f"params{jax.tree_util.keystr(keys)}"
        for keys, leaf in jax.tree_util.tree_flatten_with_path(params)[0]
        if is_variable(leaf)
    ]
    by_name: dict[str, list[Item]] = {}
    for item in items:
        if item.name is not None:
            by_name.setdefault(item.name, []).append(item)
    clashes = []
    for name, shared in by_name.items():
        if len(shared) < 2:
            continue
        if all(item.what == "variable" for item in shared) and len({i.key for i in shared}) == 1:
            where = " and ".join(paths[item.leaf] for item in shared)
            clashes.append(
                f"{where} are both named {shared[0].key!r} (rename a key of params so that "
                "each variable has its own path, e.g. 'layer1/bias' -> 'layer1_bias', then "
                "give it the TensorFlow name with name_map)"
            )
        else:
            given = " and ".join(repr(item.key) for item in shared)
            clashes.append(f"{given} share the TensorFlow name {name!r}")
    if clashes:
        raise ValueError(
            f"{caller}: {'; '.join(clashes)}; one TensorFlow name holds one value, so "
            "nothing was read or written — give each value its own name (name_map maps "
            "funcgrad names to TensorFlow names)."
        )


def _is_utf8(name: str) -> bool:
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def check_decayed_rate(caller: str, item: Item, value: Any, part: Part) -> None:
    """Raise unless the checkpoint's ``<scope>learning_rate`` is the rate an
    ``optimize_loss`` with a ``learning_rate_decay_fn`` decays: its state holds no rate
    to set (TensorFlow's decay function reads the variable, funcgrad's the number given)."""
    if np.float32(value) != np.float32(part.rate):
        raise ValueError(
            f"{caller}: {item.name!r} is {float(value)!r} in the checkpoint, and this "
            f"optimize_loss decays learning_rate={part.rate!r} (its learning_rate_decay_fn "
            "reads the rate it was built with, TensorFlow's the restored variable); build "
            f"it with learning_rate={float(np.float32(value))!r} to continue the run."
        )


def checkpoint_prefix(caller: str, path: str | os.PathLike[str]) -> str:
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


def _describe(dtype: Any, shape: tuple[int, ...]) -> str:
    return f"{np.dtype(dtype).name}{list(shape)}"


def read_each(
    caller: str, prefix: str, wanted: list[tuple[str, Any]], read: Read | None = None
) -> Iterator[tuple[str, Any]]:
    """``(name, value)`` for each ``(name, like)``, in order: the checkpoint's value of
    ``like``'s dtype and shape (any integer scalar where ``like`` is ``None``:
    ``global_step``), each read (and its CRC32C checked) only when the one before has been
    taken, by ``read(reader, name, like)`` (``None``: as a NumPy array).  Every name
    missing or of another dtype or shape is reported now, in one ``ValueError``; a damaged
    file is a ``CheckpointFormatError`` that names ``caller``."""
    with _naming(caller):
        reader = _tf_bundle.BundleReader(prefix)
    _check_all(caller, reader, wanted)
    return _each(caller, reader, wanted, read or (lambda r, name, _: r.read(name)))


#: How :func:`read_each` reads a value: from the reader, by name, for the template.
Read = Callable[[_tf_bundle.BundleReader, str, Any], Any]


def _each(
    caller: str, reader: _tf_bundle.BundleReader, wanted: list[tuple[str, Any]], read: Read
) -> Iterator[tuple[str, Any]]:
    for name, like in wanted:
        with _naming(caller):
            value = read(reader, name, like)
        yield name, value
        del value  # not held while the next is read


@contextlib.contextmanager
def _naming(caller: str) -> Iterator[None]:
    """A damaged file's ``CheckpointFormatError``, saying who read it."""
    try:
        yield
    except _tf_bundle.CheckpointFormatError as error:
        raise _tf_bundle.CheckpointFormatError(f"{caller}: {error}") from None


def _check_all(caller: str, reader: _tf_bundle.BundleReader, wanted: list[tuple[str, Any]]) -> None:
    missing: list[str] = []
    wrong: list[str] = []
    wide: list[str] = []  # dtypes JAX cannot hold now (jax_enable_x64 is off)
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
            ok = dtype == like.dtype and entry.shape == like.shape
            want = _describe(like.dtype, like.shape)
        if not ok:
            got = _describe(dtype, entry.shape) if dtype else f"a tensor of type {entry.dtype}"
            wrong.append(f"{name!r} is {got} in the checkpoint, {want} in the state")
            if dtype is not None and jax.dtypes.canonicalize_dtype(dtype) != dtype:
                wide.append(dtype.name)
    problems = []
    if missing:
        problems.append(
            f"{reader.prefix} lacks {', '.join(missing)} (it holds {len(found)} names: "
            f"{found[:6]}{' ...' if len(found) > 6 else ''}); map the names with name_map "
            "(e.g. {'W/Adam': 'train/W/Adam'}; None keeps the state's value), or pass "
            "var_list=[the variables TensorFlow trained] when some had no optimizer slots "
            "(TensorFlow makes none for a trainable=False variable, nor for one its loss "
            "never reads; optimize_loss's variables= is its var_list)"
        )
    if wrong:
        problems.append(
            f"{'; '.join(wrong)}; build the params with the shapes and dtypes the "
            "TensorFlow run saved (its Saver restores only those), then optimizer.init"
        )
    if wide:
        names = " or ".join(dict.fromkeys(wide))
        problems.append(
            f"JAX holds no {names} while jax_enable_x64 is off: pass NumPy templates "
            f'(np.{wide[0]}(0)) in extras, or call jax.config.update("jax_enable_x64", '
            "True) before building the state"
        )
    if problems:
        raise ValueError(f"{caller}: {'; and '.join(problems)}.")


class View:
    """The values of a state, an EMA state and extras, each as TensorFlow holds it."""

    def __init__(
        self,
        state: TrainState,
        parts: list[Part],
        ema_state: EmaState | None = None,
        extras: Mapping[str, Any] | None = None,
    ) -> None:
        self.state, self.parts, self.extras = state, parts, dict(extras or {})
        self.flat = Flat(state.params)
        held = held_averages(state.opt_state)
        #: Where the state holds the averages (a ``MovingAverageOptimizer``'s), or ``None``.
        self.averages_at = held[0] if held is not None else None
        ema_state = held[1] if held is not None else ema_state
        self.averages = Flat(ema_state.average) if ema_state is not None else None
        #: Per part, per slot: the slot tree's values as TensorFlow holds them, one per
        #: leaf of ``params`` (``None`` where the variable has no slot), and their
        #: structure, that of ``params``.
        treedef = self.flat.treedef
        self.slots = []
        for p, part in enumerate(parts):
            trees = part.optimizer.tf_slots(self.own(p))
            self.slots.append(
                [
                    (treedef.flatten_up_to(trees[key]), treedef)  # type: ignore[attr-defined]
                    for key, _ in part.kind.slots
                ]
            )

    def own(self, part: int) -> Any:
        """A part's own state (its learning-rate state)."""
        return get_path(self.state.opt_state, self.parts[part].at)

    def held_rate(self, part: int) -> Any:
        """The float learning rate a part's state holds, or ``None`` (a schedule, or an
        optimizer whose rate is built into its transformation)."""
        rate_state = get_path(self.state.opt_state, self.parts[part].at)
        return getattr(rate_state, "learning_rate", None)

    def held(self, item: Item) -> Any:
        """The state's value of ``item`` (a template of its dtype and shape)."""
        if item.what == "slot":
            return self.slots[item.part][item.number][0][self.flat.at[item.leaf]]
        return self.value(item)

    def value(self, item: Item) -> Any:
        """The state's value of ``item``, as the checkpoint holds it (sign, dtype): an
        extra as :func:`_held` says, the state's values as JAX holds them."""
        if item.what == "extra":
            return _held(self.extras[item.key])
        return jnp.asarray(self._value(item))

    def _value(self, item: Item) -> Any:
        if item.what == "variable":
            return self.flat.variables[item.leaf]
        if item.what == "slot":
            return self.held(item)
        if item.what == "non_slot":  # Adam's beta1_power, as the state holds it
            part = self.parts[item.part]
            return part.optimizer.tf_non_slots(self.own(item.part))[
                part.kind.non_slots[item.number]
            ]
        if item.what == "learning_rate":  # the rate the state holds, else optimize_loss's
            held = self.held_rate(item.part)
            return jnp.float32(self.parts[item.part].rate) if held is None else held
        if item.what == "global_step":
            return self.state.global_step
        if item.what in ("loss_scale", "good_steps"):
            return getattr(self.state.opt_state, item.what)
        assert self.averages is not None and item.what == "average"
        return self.averages.variables[item.leaf]
