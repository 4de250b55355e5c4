"""The one door to JAX's internals: every read of a jaxpr's structure goes through here.

Design note
-----------
funcgrad reads jaxprs (connectivity, the rewriter, sparse reads, derivative modes), and
so depends on things JAX keeps private and changes without notice: the parameters of the
equations that hold sub-jaxprs, which primitives those are, and whether a jaxpr carries
its constants.  JAX 0.11 replaced ``scan``'s ``num_consts`` / ``num_carry`` with the
FlatTrees ``ft_in`` / ``ft_out``, merged ``ClosedJaxpr`` into ``Jaxpr`` and renamed
``closed_call`` ``eval_jaxpr``.  This module is the only place that knows such things;
every other module asks it through the typed views below, and an architecture test
(``tests/_core/test_jax_internals.py``) keeps them off JAX's parameters and names.

What it reads, per kind of equation (:class:`Kind`):

* ``scan`` (:func:`scan`): the body, its constants, carry and scanned-over inputs
  (``num_consts`` / ``num_carry``, or the groups of ``ft_in``), ``length``, ``reverse``,
  ``unroll``, ``_split_transpose``;
* ``while`` (:func:`while_loop`): ``cond_jaxpr`` / ``body_jaxpr`` and their constants'
  counts ``cond_nconsts`` / ``body_nconsts``;
* ``cond`` (:func:`cond_branches`): ``branches``, after the index;
* calls (:func:`call`) -- ``jit`` (``pjit``), ``eval_jaxpr`` (``closed_call``, ``call``),
  ``remat2`` (``checkpoint``), ``shard_map``, ``custom_jvp_call``, ``custom_vjp_call`` --
  the body whose inputs and outputs are the equation's, one to one; a ``jit``'s name,
  ``inline`` and ``keep_unused``; a ``checkpoint``'s ``policy`` and ``prevent_cse``; the
  leading ``num_consts`` inputs of a custom rule; a ``custom_vjp``'s backward function;
* jaxprs as values (:class:`Closed`): an open jaxpr and its constants, whether JAX keeps
  them in a ``ClosedJaxpr`` (0.10) or in the jaxpr itself (0.11 and later);
* the re-emission of one equation (:func:`bind_equation`), its source line and name
  scopes, and which primitives have a Taylor-mode (``jet``) rule.

How: an equation is classified by its primitive's identity where ``jax.extend`` exposes
the primitive, else by its name, so ``eval_jaxpr`` and ``closed_call`` are one kind
whatever the version calls it.  A layout is detected by the parameters present, never by
the version, and checked: the parts must add up to the equation's inputs and outputs and
to the body's.  A layout that is missing or does not add up raises
:class:`UnsupportedJaxprLayoutError`, naming the JAX version, the primitive and the parameters
seen -- never a ``KeyError``, never a silent mis-split.

What it assumes: an equation whose primitive it does not know but which holds a
sub-jaxpr is of kind :attr:`Kind.UNKNOWN`.  The analyses treat it conservatively (every
input reaches every output; nothing inside is rewritten) and :func:`kind` warns once per
primitive (:class:`UnknownJaxprWarning`), so the next rename surfaces in the test suite,
where warnings are errors, instead of degrading quietly.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import warnings
from collections.abc import Callable
from collections.abc import Iterator
from collections.abc import Mapping
from collections.abc import Sequence
from typing import Any

import jax
from jax import lax
from jax.experimental import jet
from jax.extend import core
from jax.extend import source_info_util
from jax.extend.core import primitives

__all__ = [
    "CALLBACK_LOGGER",
    "Call",
    "Closed",
    "Eqn",
    "Jaxpr",
    "Kind",
    "Literal",
    "Scan",
    "UnknownJaxprWarning",
    "UnsupportedJaxprLayoutError",
    "Var",
    "While",
    "bind_equation",
    "call",
    "called_name",
    "closed",
    "cond_branches",
    "custom_vjp_backward",
    "first_order_primitive_names",
    "has_jet_rule",
    "is_dropped",
    "is_tracing",
    "kind",
    "name_scopes",
    "named_call_body",
    "rule_consts",
    "scan",
    "source_frames",
    "sub_jaxprs",
    "trace",
    "trace_with_shape",
    "while_loop",
]

#: An open jaxpr: ``constvars``, ``invars``, ``eqns``, ``outvars``.
Jaxpr = core.Jaxpr
Eqn = core.JaxprEqn
Var = core.Var
Literal = core.Literal

#: Whether this JAX keeps a closed jaxpr's constants in a class of its own (0.10).
_SEPARATE_CLOSED = core.ClosedJaxpr is not core.Jaxpr
_JAXPR_TYPES: tuple[type, ...] = (
    (core.Jaxpr, core.ClosedJaxpr) if _SEPARATE_CLOSED else (core.Jaxpr,)
)


class UnsupportedJaxprLayoutError(NotImplementedError):
    """An equation's parameters are not laid out as funcgrad knows them."""


class UnknownJaxprWarning(UserWarning):
    """funcgrad met an equation that holds a sub-jaxpr of a kind it does not know."""


class Kind(enum.Enum):
    """What an equation is, for the analyses that look inside sub-jaxprs."""

    PRIMITIVE = "primitive"  # first order: holds no sub-jaxpr, or only a combiner
    JIT = "jit"
    CALL = "call"  # eval_jaxpr (closed_call / call before JAX 0.11)
    REMAT = "remat"
    SHARD_MAP = "shard_map"
    CUSTOM_JVP = "custom_jvp"
    CUSTOM_VJP = "custom_vjp"
    SCAN = "scan"
    WHILE = "while"
    COND = "cond"
    OPAQUE = "opaque"  # holds sub-jaxprs funcgrad deliberately does not look into
    UNKNOWN = "unknown"  # holds sub-jaxprs, and funcgrad does not know the primitive

    @property
    def is_call(self) -> bool:
        """Whether the equation calls one body with its own inputs and outputs."""
        return self in _CALL_KINDS

    @property
    def is_custom_rule(self) -> bool:
        """Whether a custom derivative rule decides the equation's derivative."""
        return self in (Kind.CUSTOM_JVP, Kind.CUSTOM_VJP)


_CALL_KINDS = frozenset(
    {Kind.JIT, Kind.CALL, Kind.REMAT, Kind.SHARD_MAP, Kind.CUSTOM_JVP, Kind.CUSTOM_VJP}
)

#: By name, for primitives ``jax.extend`` does not expose and for the names older or
#: newer versions give them; identity (below) comes first.
_BY_NAME = {
    "jit": Kind.JIT,
    "pjit": Kind.JIT,
    "eval_jaxpr": Kind.CALL,
    "closed_call": Kind.CALL,
    "call": Kind.CALL,
    "core_call": Kind.CALL,
    "remat2": Kind.REMAT,
    "checkpoint": Kind.REMAT,
    "shard_map": Kind.SHARD_MAP,
    "custom_jvp_call": Kind.CUSTOM_JVP,
    "custom_vjp_call": Kind.CUSTOM_VJP,
    "scan": Kind.SCAN,
    "while": Kind.WHILE,
    "cond": Kind.COND,
    # first-order primitives whose parameters hold the function combining two values
    **dict.fromkeys(
        (
            "reduce",
            "reduce_window",
            "scatter",
            "scatter-add",
            "scatter-max",
            "scatter-min",
            "scatter-mul",
            "scatter-sub",
            "select_and_scatter",
        ),
        Kind.PRIMITIVE,
    ),
    **dict.fromkeys(
        (
            "custom_lin",
            "custom_linear_solve",
            "custom_partitioning",
            "custom_transpose_call",
            "linear_call",
            "pallas_call",
            "run_state",
            "xla_pmap",
        ),
        Kind.OPAQUE,
    ),
}
_BY_PRIMITIVE: dict[Any, Kind] = {
    p: k
    for attr, k in (
        ("jit_p", Kind.JIT),
        ("closed_call_p", Kind.CALL),
        ("call_p", Kind.CALL),
        ("remat_p", Kind.REMAT),
        ("custom_jvp_call_p", Kind.CUSTOM_JVP),
        ("custom_vjp_call_p", Kind.CUSTOM_VJP),
        ("scan_p", Kind.SCAN),
        ("while_p", Kind.WHILE),
        ("cond_p", Kind.COND),
        ("custom_lin_p", Kind.OPAQUE),
        ("linear_solve_p", Kind.OPAQUE),
    )
    if (p := getattr(primitives, attr, None)) is not None
}
#: Each primitive met, classified once (a primitive holds sub-jaxprs always or never).
_SEEN: dict[Any, Kind] = {}


def kind(eqn: Eqn) -> Kind:
    """The kind of ``eqn``; warns once per primitive of :attr:`Kind.UNKNOWN`."""
    primitive = eqn.primitive
    found = _SEEN.get(primitive)
    if found is None:
        found = _known(primitive)
        if found is None:
            found = Kind.UNKNOWN if next(sub_jaxprs(eqn), None) is not None else Kind.PRIMITIVE
        if found is Kind.UNKNOWN:
            warnings.warn(
                f"funcgrad does not know the primitive {primitive.name!r} of JAX "
                f"{jax.__version__}, which holds a sub-jaxpr (parameters {sorted(eqn.params)}): "
                "it treats every input as reaching every output and does not look inside "
                "(zeros where TensorFlow gives None; no gradient override inside). Use a JAX "
                "version funcgrad supports (0.10.2 to 0.12.x), or report it.",
                UnknownJaxprWarning,
                stacklevel=2,
            )
        _SEEN[primitive] = found
    return found


def _known(primitive: Any) -> Kind | None:
    return _BY_PRIMITIVE.get(primitive) or _BY_NAME.get(primitive.name)


def first_order_primitive_names() -> frozenset[str]:
    """The names of JAX's first-order primitives (of those ``jax.extend`` lists)."""
    found = {p for p in vars(primitives).values() if isinstance(p, core.Primitive)}
    return frozenset(p.name for p in found if _known(p) in (None, Kind.PRIMITIVE))


def _unsupported(eqn: Eqn, what: str) -> UnsupportedJaxprLayoutError:
    return UnsupportedJaxprLayoutError(
        f"funcgrad does not know this layout of JAX {jax.__version__}'s {eqn.primitive.name!r} "
        f"equation (parameters {sorted(eqn.params)}): {what}. funcgrad supports JAX 0.10.2 "
        "to 0.12.x; use one of those, or report it with your JAX version."
    )


def _param(eqn: Eqn, name: str) -> Any:
    try:
        return eqn.params[name]
    except KeyError:
        raise _unsupported(eqn, f"it has no {name!r}") from None


# --- jaxprs as values ------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Closed:
    """An open jaxpr with values for its ``constvars``: what JAX calls a closed jaxpr."""

    jaxpr: Jaxpr
    consts: tuple[Any, ...]

    def __post_init__(self) -> None:
        if len(self.jaxpr.constvars) != len(self.consts):
            raise UnsupportedJaxprLayoutError(
                f"funcgrad does not know this layout of a JAX {jax.__version__} jaxpr: "
                f"{len(self.jaxpr.constvars)} constvars and {len(self.consts)} constants. "
                "funcgrad supports JAX 0.10.2 to 0.12.x; use one of those, or report it."
            )

    @property
    def in_avals(self) -> list[Any]:
        return [v.aval for v in self.jaxpr.invars]

    @property
    def out_avals(self) -> list[Any]:
        return [v.aval for v in self.jaxpr.outvars]

    def __call__(self, *args: Any) -> list[Any]:
        """The jaxpr's outputs at ``args``, as ``jax.core.jaxpr_as_fun`` evaluates it."""
        return list(core.jaxpr_as_fun(_as_jax(self))(*args))


def _as_jax(c: Closed) -> Any:
    """``c`` as JAX's closed jaxpr."""
    if _SEPARATE_CLOSED:
        return core.ClosedJaxpr(c.jaxpr, list(c.consts))
    jaxpr: Any = c.jaxpr  # JAX 0.11 and later
    return jaxpr.with_consts(list(c.consts))


def closed(value: Any) -> Closed:
    """A jaxpr as JAX keeps it in a parameter or returns it: closed or open (no consts)."""
    if _SEPARATE_CLOSED and isinstance(value, core.ClosedJaxpr):
        return Closed(value.jaxpr, tuple(value.consts))
    if isinstance(value, core.Jaxpr):
        return Closed(value, tuple(getattr(value, "consts", ())))
    raise UnsupportedJaxprLayoutError(
        f"funcgrad does not know this kind of JAX {jax.__version__} jaxpr: "
        f"{type(value).__name__}. funcgrad supports JAX 0.10.2 to 0.12.x; use one of "
        "those, or report it."
    )


def trace(fun: Callable[..., Any], *args: Any) -> Closed:
    """``jax.make_jaxpr(fun)(*args)`` as a :class:`Closed`."""
    return closed(jax.make_jaxpr(fun)(*args))


def trace_with_shape(fun: Callable[..., Any], *args: Any) -> tuple[Closed, Any]:
    """:func:`trace`, and the shapes of ``fun``'s outputs (``return_shape=True``)."""
    made, shape = jax.make_jaxpr(fun, return_shape=True)(*args)
    return closed(made), shape


def sub_jaxprs(eqn: Eqn) -> Iterator[Jaxpr]:
    """Every jaxpr ``eqn``'s parameters hold, open."""
    for value in eqn.params.values():
        for sub in value if isinstance(value, tuple | list) else (value,):
            if isinstance(sub, _JAXPR_TYPES):
                yield closed(sub).jaxpr


# --- views of structural equations ------------------------------------------------------


def _check_adds_up(eqn: Eqn, body: Closed, parts: Sequence[int], what: str) -> None:
    if min(parts) < 0 or sum(parts) != len(eqn.invars) or len(body.jaxpr.invars) != len(eqn.invars):
        raise _unsupported(
            eqn,
            f"its {what} {tuple(parts)} do not add up to its {len(eqn.invars)} inputs "
            f"and its body's {len(body.jaxpr.invars)}",
        )


def _three(
    values: Sequence[Any], first: int, second: int
) -> tuple[list[Any], list[Any], list[Any]]:
    """``values`` as their first ``first``, their next ``second`` and the rest."""
    k = first + second
    return list(values[:first]), list(values[first:k]), list(values[k:])


@dataclasses.dataclass(frozen=True)
class Scan:
    """A ``scan`` equation: ``body(*consts, *carry, *xs) -> (*carry, *ys)``."""

    body: Closed
    n_consts: int
    n_carry: int
    length: int
    reverse: bool
    unroll: Any
    split_transpose: bool

    def split(self, values: Sequence[Any]) -> tuple[list[Any], list[Any], list[Any]]:
        """``values`` (one per input of the equation) as ``(consts, carry, xs)``."""
        return _three(values, self.n_consts, self.n_carry)

    def run(self, step: Callable[[Any, Any], tuple[Any, Any]], init: Any, xs: Any) -> Any:
        """``lax.scan(step, init, xs)`` with this scan's length, direction and unrolling."""
        extra = {"_split_transpose": True} if self.split_transpose else {}
        return lax.scan(
            step, init, xs, length=self.length, reverse=self.reverse, unroll=self.unroll, **extra
        )


def scan(eqn: Eqn) -> Scan:
    """The view of a ``scan`` equation (``kind(eqn) is Kind.SCAN``)."""
    body = closed(_param(eqn, "jaxpr"))
    p = eqn.params
    if "num_consts" in p and "num_carry" in p:
        n_consts, n_carry = p["num_consts"], p["num_carry"]
    elif "ft_in" in p and "ft_out" in p:
        n_consts, n_carry, _ = _group_sizes(eqn, p["ft_in"], 3)
        carry_out, _ = _group_sizes(eqn, p["ft_out"], 2)
        if carry_out != n_carry:
            raise _unsupported(eqn, f"ft_in has {n_carry} carries and ft_out {carry_out}")
    else:
        raise _unsupported(eqn, "it has neither num_consts/num_carry nor ft_in/ft_out")
    n_xs = len(eqn.invars) - n_consts - n_carry
    _check_adds_up(eqn, body, (n_consts, n_carry, n_xs), "constants, carry and xs")
    if len(body.jaxpr.outvars) != len(eqn.outvars) or n_carry > len(eqn.outvars):
        raise _unsupported(
            eqn,
            f"its body has {len(body.jaxpr.outvars)} outputs, the equation "
            f"{len(eqn.outvars)} with {n_carry} carries",
        )
    return Scan(
        body,
        n_consts,
        n_carry,
        _param(eqn, "length"),
        _param(eqn, "reverse"),
        _param(eqn, "unroll"),
        bool(p.get("_split_transpose", False)),
    )


def _group_sizes(eqn: Eqn, tree: Any, groups: int) -> list[int]:
    """The number of leaves in each top-level group of a FlatTree parameter."""
    try:
        sizes = [len(group) for group in tree.unpack()]
    except (AttributeError, TypeError, ValueError) as e:
        raise _unsupported(eqn, f"its FlatTree {tree!r} does not unpack ({e})") from None
    if len(sizes) != groups:
        raise _unsupported(eqn, f"its FlatTree {tree!r} has {len(sizes)} groups, not {groups}")
    return sizes


@dataclasses.dataclass(frozen=True)
class While:
    """A ``while`` equation: ``cond(*cond_consts, *carry)``, ``body(*body_consts, *carry)``."""

    cond: Closed
    body: Closed
    n_cond: int
    n_body: int

    def split(self, values: Sequence[Any]) -> tuple[list[Any], list[Any], list[Any]]:
        """``values`` (one per input) as ``(cond_consts, body_consts, carry)``."""
        return _three(values, self.n_cond, self.n_body)


def while_loop(eqn: Eqn) -> While:
    """The view of a ``while`` equation (``kind(eqn) is Kind.WHILE``)."""
    cond = closed(_param(eqn, "cond_jaxpr"))
    body = closed(_param(eqn, "body_jaxpr"))
    n_cond, n_body = _param(eqn, "cond_nconsts"), _param(eqn, "body_nconsts")
    n_carry = len(eqn.invars) - n_cond - n_body
    if (
        n_carry != len(eqn.outvars)
        or len(body.jaxpr.invars) != n_body + n_carry
        or len(cond.jaxpr.invars) != n_cond + n_carry
        or len(body.jaxpr.outvars) != n_carry
    ):
        raise _unsupported(
            eqn,
            f"{n_cond} condition and {n_body} body constants, {len(eqn.invars)} inputs and "
            f"{len(eqn.outvars)} outputs do not match its jaxprs",
        )
    return While(cond, body, n_cond, n_body)


def cond_branches(eqn: Eqn) -> list[Closed]:
    """The branches of a ``cond`` equation, each a function of its inputs after the index."""
    branches = [closed(b) for b in _param(eqn, "branches")]
    for b in branches:
        if len(b.jaxpr.invars) != len(eqn.invars) - 1 or len(b.jaxpr.outvars) != len(eqn.outvars):
            raise _unsupported(eqn, "a branch's inputs or outputs are not the equation's")
    return branches


@dataclasses.dataclass(frozen=True)
class Call:
    """An equation that calls one body with its own inputs and outputs (``kind.is_call``).

    ``rule_consts``: the leading inputs of a custom rule's call that are its constants
    (no cotangent reaches them through the rule); 0 for other calls.
    """

    kind: Kind
    body: Closed
    rule_consts: int
    _params: Mapping[str, Any] = dataclasses.field(repr=False)

    def staged(self, fun: Callable[..., Any]) -> Callable[..., Any]:
        """``fun`` (a function of the body's inputs) called as the equation calls its body:
        under ``jax.jit`` with the call's name, ``inline`` and ``keep_unused``; under
        ``jax.checkpoint`` with its ``policy`` and ``prevent_cse``; else as it is."""
        p = self._params
        if self.kind is Kind.JIT:
            # A plain function named as the call: JAX names a callable without code by its
            # ``str()``, which for a partial prints the whole jaxpr and its constants.
            def named(*args: Any) -> Any:
                return fun(*args)

            named.__name__ = named.__qualname__ = str(p.get("name", "jit"))
            return jax.jit(named, inline=p.get("inline", False), keep_unused=p["keep_unused"])
        if self.kind is Kind.REMAT:
            return jax.checkpoint(fun, prevent_cse=p["prevent_cse"], policy=p["policy"])
        return fun


_BODY_PARAMS = {
    Kind.JIT: "jaxpr",
    Kind.CALL: "call_jaxpr",
    Kind.REMAT: "jaxpr",
    Kind.SHARD_MAP: "jaxpr",
    Kind.CUSTOM_JVP: "call_jaxpr",
    Kind.CUSTOM_VJP: "call_jaxpr",
}
_STAGING_PARAMS = {Kind.JIT: ("keep_unused",), Kind.REMAT: ("prevent_cse", "policy")}


def call(eqn: Eqn) -> Call:
    """The view of a call equation (``kind(eqn).is_call``)."""
    k = kind(eqn)
    if not k.is_call:
        raise _unsupported(eqn, f"it is of kind {k.value}, not a call")
    body = closed(_param(eqn, _BODY_PARAMS[k]))
    if len(body.jaxpr.invars) != len(eqn.invars) or len(body.jaxpr.outvars) != len(eqn.outvars):
        raise _unsupported(
            eqn,
            f"its body has {len(body.jaxpr.invars)} inputs and {len(body.jaxpr.outvars)} "
            f"outputs, the equation {len(eqn.invars)} and {len(eqn.outvars)}",
        )
    for name in _STAGING_PARAMS.get(k, ()):
        _param(eqn, name)
    consts = _param(eqn, "num_consts") if k.is_custom_rule else 0
    return Call(k, body, consts, eqn.params)


def rule_consts(eqn: Eqn) -> int:
    """The leading inputs of a custom rule's call that are its constants (0 otherwise)."""
    return call(eqn).rule_consts if kind(eqn).is_custom_rule else 0


def called_name(eqn: Eqn) -> str | None:
    """The name of the function a ``jit`` or custom-rule call calls (``"relu"``)."""
    k = kind(eqn)
    if k is Kind.JIT:
        name = eqn.params.get("name")
        return None if name is None else str(name)
    if k.is_custom_rule:
        info = call(eqn).body.jaxpr.debug_info
        return None if info is None else str(info.func_name)
    return None


def named_call_body(params: Mapping[str, Any], name: str) -> Closed | None:
    """The body of a ``jit`` call of the function ``name``, given the equation's parameters
    (an override's ``op.params``); ``None`` for any other op."""
    if params.get("name") != name or "jaxpr" not in params:
        return None
    return closed(params["jaxpr"])


def custom_vjp_backward(eqn: Eqn) -> Any:
    """The user's backward function of a ``custom_vjp`` call, or ``None``."""
    if kind(eqn) is not Kind.CUSTOM_VJP:
        return None
    return getattr(eqn.params.get("bwd"), "f", None)


# --- equations as JAX emits them ---------------------------------------------------------


def bind_equation(eqn: Eqn, invals: Sequence[Any]) -> list[Any]:
    """Re-emit ``eqn`` unchanged into the current trace, with its own source line and
    name scope (as ``jax.core.eval_jaxpr`` re-emits: the user's line, not funcgrad's,
    and no new Python traceback to take per equation)."""
    params = eqn.primitive.get_bind_params(eqn.params)
    source = eqn.source_info
    name_stack = source_info_util.current_name_stack() + source.name_stack
    with source_info_util.user_context(source.traceback, name_stack=name_stack), eqn.ctx.manager:
        out = eqn.primitive.bind(*invals, **params)
    return list(out) if eqn.primitive.multiple_results else [out]


def source_frames(eqn: Eqn) -> list[tuple[str, int]]:
    """``(file, line)`` of each frame of the traceback that made ``eqn``, innermost first."""
    traceback = eqn.source_info.traceback
    frames: list[Any] = traceback.frames if traceback is not None else []
    return [(f.file_name, f.line_num) for f in frames]


def name_scopes(eqn: Eqn) -> list[str]:
    """The names of the scopes (``jax.named_scope``) ``eqn`` was made in, outermost first."""
    return [
        str(getattr(scope, "name", ""))
        for scope in getattr(eqn.source_info.name_stack, "stack", ())
    ]


def is_dropped(var: Any) -> bool:
    """Whether ``var`` is an output the jaxpr drops (``_``)."""
    return isinstance(var, core.DropVar)


#: The logger through which JAX reports an exception a host callback raised.
CALLBACK_LOGGER = "jax._src.callback"
#: The trace state at the top level, where no transformation is tracing.
_TOP_LEVEL = core.get_opaque_trace_state()


def is_tracing() -> bool:
    """Whether a JAX transformation is tracing now (``jax.extend``'s opaque trace state)."""
    return core.get_opaque_trace_state() != _TOP_LEVEL


@functools.cache
def has_jet_rule(primitive: Any) -> bool:
    """Whether ``jax.experimental.jet`` has a Taylor-mode rule for ``primitive``."""
    return primitive in jet.jet_rules
