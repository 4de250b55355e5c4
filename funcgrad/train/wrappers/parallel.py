"""Data-parallel training steps over a ``jax.sharding.Mesh``.

Data parallelism on JAX's own engine: the batch is split along a mesh axis, the
parameters and optimizer state are replicated, and XLA inserts the gradient
all-reduce.  :func:`data_parallel` leaves that to the compiler (GSPMD: any step
function, unchanged); :func:`shard_map_minimize` writes it out — each device computes
the gradient of its shard and a ``lax.pmean`` averages them — the explicit form of
``tf.distribute.MirroredStrategy``'s all-reduce.  Both equal the single-device step up
to the order of floating-point summation.  The same code runs across hosts once every
process has called ``jax.distributed.initialize`` (see ``docs/scale.md``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
from jax.sharding import AxisType
from jax.sharding import Mesh
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec

from funcgrad.train._loss_and_grads import grads_and_vars
from funcgrad.train._loss_and_grads import loss_and_grads
from funcgrad.train.optimizer import Optimizer
from funcgrad.train.state import TrainState

__all__ = ["data_parallel", "shard_map_minimize"]


def _devices_along(caller: str, mesh: Mesh, axis_name: str) -> int:
    if axis_name not in mesh.shape:
        raise ValueError(
            f"{caller}: the mesh has axes {tuple(mesh.shape)}, not {axis_name!r}; pass "
            "axis_name= one of them, or build the mesh with jax.make_mesh((n,), ('data',))."
        )
    return mesh.shape[axis_name]


def _compiler_chosen(mesh: Mesh) -> Mesh:
    """``mesh`` with every axis ``Auto``: the compiler (GSPMD) shards what ``step`` computes.

    ``jax.make_mesh`` gives ``Explicit`` axes, under which JAX types every value with its
    sharding and refuses what it cannot resolve alone (a gather of a replicated table by
    sharded ids, ``E[ids]``); a data-parallel step is unchanged single-device code, so
    its inside is left to the compiler whatever the mesh's axis types.  The step runs
    under this mesh as the abstract-mesh context, which overrides a ``jax.set_mesh``
    of the user's ``Explicit`` mesh around the call.
    """
    return mesh.update(axis_types=(AxisType.Auto,) * len(mesh.axis_names))


def _check_batch(caller: str, batch: tuple[Any, ...], n: int, axis_name: str) -> None:
    """Every batch array has a leading axis that the ``n`` devices split evenly."""
    leaves = jax.tree.leaves(batch)
    sizes = [jax.numpy.shape(x)[0] if jax.numpy.ndim(x) else None for x in leaves]
    if not leaves or any(s is None or s % n for s in sizes):
        raise ValueError(
            f"{caller}: every batch array needs a leading axis divisible by the {n} "
            f"devices along mesh axis {axis_name!r}, got leading sizes {sizes}; pad or "
            f"drop examples to a multiple of {n}."
        )


def data_parallel(
    step: Callable[..., Any], mesh: Mesh, *, axis_name: str = "data"
) -> Callable[..., Any]:
    """Jit ``step(state, *batch)`` data-parallel: batch sharded, state replicated.

    The returned function places ``state`` replicated on every device of ``mesh`` and
    each batch array sharded along ``axis_name`` by its leading axis, then runs one
    ``jax.jit`` of ``step``; XLA partitions the computation (GSPMD) and adds the
    all-reduce where ``step`` sums or averages over the batch.  Outputs come back
    replicated.  ``step`` is unchanged single-device code, e.g.
    ``lambda s, x, y: opt.minimize(loss_fn, s, x, y)``.  The mesh's axis types do not
    matter: ``step`` runs with every axis ``Auto`` (the compiler chooses), also on the
    ``Explicit`` axes ``jax.make_mesh`` gives by default, so that an embedding lookup
    ``E[ids]`` of sharded ids works as on one device.

    Args:
      step: ``step(state, *batch)``, any pure function; ``batch`` arrays have the
        example axis first.
      mesh: the devices, e.g. ``jax.make_mesh((8,), ("data",))``, of any axis types.
      axis_name: the mesh axis the batch is split along.

    Returns:
      ``run(state, *batch)`` with ``step``'s result, replicated.  Multi-process: pass
      batch arrays made with ``jax.make_array_from_process_local_data``.

    Raises:
      ValueError: ``axis_name`` is not an axis of ``mesh``; when called, a batch array
        whose leading axis the devices along ``axis_name`` do not divide (nothing runs).

    Example:
      >>> mesh = jax.make_mesh((8,), ("data",))
      >>> opt = fg.train.GradientDescentOptimizer(0.1)
      >>> loss_fn = lambda w, x: jnp.mean((x - w) ** 2)
      >>> step = fg.train.data_parallel(lambda s, x: opt.minimize(loss_fn, s, x), mesh)
      >>> state, loss = step(opt.init(jnp.float32(0.0)), jnp.arange(16.0))
      >>> float(loss), float(state.params), len(state.params.sharding.device_set)
      (77.5, 1.5, 8)
    """
    caller = "fg.train.data_parallel(step, mesh, axis_name)"
    n = _devices_along(caller, mesh, axis_name)
    mesh = _compiler_chosen(mesh)
    replicated = NamedSharding(mesh, PartitionSpec())
    sharded = NamedSharding(mesh, PartitionSpec(axis_name))
    jitted = jax.jit(step, out_shardings=replicated)

    def run(state: Any, *batch: Any) -> Any:
        _check_batch(caller, batch, n, axis_name)
        with jax.sharding.use_abstract_mesh(mesh.abstract_mesh):
            return jitted(jax.device_put(state, replicated), *jax.device_put(batch, sharded))

    return run


def shard_map_minimize(
    optimizer: Optimizer,
    loss_fn: Callable[..., Any],
    mesh: Mesh,
    *,
    axis_name: str = "data",
) -> Callable[..., tuple[TrainState, jax.Array]]:
    """A data-parallel ``minimize`` step written with ``jax.shard_map`` and ``pmean``.

    Each device holds the whole ``TrainState`` and one shard of the batch; it computes
    the loss and gradient of its shard, ``jax.lax.pmean`` averages both over
    ``axis_name``, and every device applies the same mean gradient.  With a ``loss_fn``
    that is a mean over examples this is the single-device ``minimize`` on the whole
    batch.  Use it where the all-reduce must be explicit (to combine with other
    collectives, or to see exactly what is communicated); :func:`data_parallel` lets
    XLA choose.

    Args:
      optimizer: any ``fg.train`` optimizer.
      loss_fn: ``loss_fn(params, *batch_shard)`` returns a scalar, the mean loss over
        the shard's examples.
      mesh: the devices, of any axis types (as :func:`data_parallel`).
      axis_name: the mesh axis the batch is split along.

    Returns:
      A jitted ``step(state, *batch) -> (new_state, loss)``, ``loss`` the mean over
      shards at the parameters before the step; state and loss come back replicated.

    Raises:
      ValueError: as :func:`data_parallel`.

    Example:
      >>> mesh = jax.make_mesh((8,), ("data",))
      >>> opt = fg.train.GradientDescentOptimizer(0.1)
      >>> loss_fn = lambda w, x: jnp.mean((x - w) ** 2)
      >>> step = fg.train.shard_map_minimize(opt, loss_fn, mesh)
      >>> state, loss = step(opt.init(jnp.float32(0.0)), jnp.arange(16.0))
      >>> float(loss), float(state.params)
      (77.5, 1.5)
    """
    caller = "fg.train.shard_map_minimize(optimizer, loss_fn, mesh, axis_name)"
    n = _devices_along(caller, mesh, axis_name)
    mesh = _compiler_chosen(mesh)

    def local_step(state: TrainState, *shard: Any) -> tuple[TrainState, jax.Array]:
        loss, grads = loss_and_grads(caller, loss_fn, state.params, shard, optimizer.var_list)
        loss, grads = jax.lax.pmean((loss, grads), axis_name)
        return optimizer.apply_gradients(grads_and_vars(grads, state.params), state), loss

    def run(state: TrainState, *batch: Any) -> tuple[TrainState, jax.Array]:
        _check_batch(caller, batch, n, axis_name)
        spmd = jax.shard_map(
            local_step,
            mesh=mesh,
            in_specs=(PartitionSpec(), *[PartitionSpec(axis_name)] * len(batch)),
            out_specs=PartitionSpec(),
            # Per-device gradients, averaged by the explicit pmean in local_step: with
            # check_vma, JAX would already sum a replicated parameter's gradient.
            check_vma=False,
        )
        return spmd(state, *batch)

    return data_parallel(run, mesh, axis_name=axis_name)
