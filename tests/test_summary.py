"""fg.gradient_summary against NumPy, and fg.write_gradient_summary through tensorboardX."""

import pathlib
import struct
from typing import Any

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import funcgrad as fg


def _random_gvs(seed: int = 0) -> list:
    rng = np.random.default_rng(seed)
    shapes = [(3, 4), (5,), (2, 3, 2)]
    return [(rng.normal(size=s).astype(np.float32), np.zeros(s, np.float32)) for s in shapes]


def test_matches_numpy() -> None:
    gvs = _random_gvs()
    s = fg.gradient_summary([(jnp.asarray(g), v) for g, v in gvs], bins=7)
    for i, (g, _) in enumerate(gvs):
        counts, edges = np.histogram(g, bins=7)
        np.testing.assert_array_equal(s.histogram[i], counts)
        np.testing.assert_allclose(s.bin_edges[i], edges, atol=1e-6 * np.ptp(g))
        np.testing.assert_allclose(s.norm[i], np.linalg.norm(g), rtol=1e-6)
        np.testing.assert_allclose(s.min[i], g.min())
        np.testing.assert_allclose(s.max[i], g.max())
        np.testing.assert_allclose(s.sum[i], g.sum(), rtol=1e-5)
        np.testing.assert_allclose(s.sum_squares[i], (g**2).sum(), rtol=1e-6)
    assert s.nonfinite_count.tolist() == [0, 0, 0]
    assert s.is_none.tolist() == [False, False, False]
    all_grads = np.concatenate([g.ravel() for g, _ in gvs])
    np.testing.assert_allclose(s.global_norm, np.linalg.norm(all_grads), rtol=1e-6)


def test_none_gradients_are_counted_not_crashed_on() -> None:
    gvs = [(None, jnp.zeros(3)), (jnp.array([1.0, 2.0]), jnp.zeros(2)), (None, jnp.zeros(1))]
    s = fg.gradient_summary(gvs, bins=4)
    assert s.is_none.tolist() == [True, False, True]
    assert int(s.none_count) == 2
    assert s.norm[0] == 0 and s.histogram[0].sum() == 0 and s.histogram[2].sum() == 0
    np.testing.assert_allclose(s.global_norm, np.sqrt(5.0))


def test_non_finite_elements_are_counted_and_left_out_of_the_histogram() -> None:
    g = jnp.array([1.0, jnp.nan, 3.0, jnp.inf, -jnp.inf, 2.0])
    s = fg.gradient_summary([(g, None), (jnp.array([jnp.nan, jnp.nan]), None)], bins=2)
    assert s.nonfinite_count.tolist() == [3, 2]
    assert s.histogram.tolist() == [[1, 2], [0, 0]]  # np.histogram([1, 3, 2], bins=2)
    assert (float(s.min[0]), float(s.max[0]), float(s.sum[0])) == (1.0, 3.0, 6.0)
    assert (float(s.min[1]), float(s.max[1])) == (0.0, 0.0)
    assert np.isnan(s.norm).tolist() == [True, True]  # as tf.norm: NaN poisons the norm


def test_constant_gradient_uses_numpy_unit_range() -> None:
    s = fg.gradient_summary([(jnp.full((4,), 2.0), None)], bins=4)
    counts, edges = np.histogram(np.full((4,), 2.0, np.float32), bins=4)
    np.testing.assert_array_equal(s.histogram[0], counts)
    np.testing.assert_allclose(s.bin_edges[0], edges)


@pytest.mark.parametrize("dtype", [jnp.bfloat16, jnp.float16, jnp.float32], ids=str)
def test_low_precision_gradients_are_summarised_in_float32(dtype: jnp.dtype) -> None:
    g = jnp.array([0.5, -1.5, 2.0], dtype)
    s = fg.gradient_summary([(g, None)], bins=3)
    assert s.norm.dtype == jnp.float32
    np.testing.assert_allclose(s.norm[0], np.linalg.norm([0.5, -1.5, 2.0]), rtol=1e-6)


def test_jit_traces_once_and_matches_eager() -> None:
    @jax.jit
    @chex.assert_max_traces(n=1)
    def summarise(w: jax.Array, b: jax.Array) -> fg.GradientSummary:
        return fg.gradient_summary([(w, w), (None, b), (b, b)], bins=5)

    gvs = _random_gvs()
    w, b = jnp.asarray(gvs[0][0]), jnp.asarray(gvs[1][0])
    for scale in (1.0, 2.0):
        jitted = summarise(scale * w, scale * b)
        eager = fg.gradient_summary([(scale * w, w), (None, b), (scale * b, b)], bins=5)
        chex.assert_trees_all_close(jitted, eager, rtol=1e-6)


def test_vmap_over_a_batch_of_gradients() -> None:
    batch = jnp.asarray(np.random.default_rng(1).normal(size=(3, 10)).astype(np.float32))
    s = jax.vmap(lambda g: fg.gradient_summary([(g, None), (None, None)], bins=3))(batch)
    assert s.histogram.shape == (3, 2, 3)
    for row in range(3):
        one = fg.gradient_summary([(batch[row], None), (None, None)], bins=3)
        chex.assert_trees_all_close(jax.tree.map(lambda x: x[row], s), one)  # noqa: B023
    np.testing.assert_allclose(s.global_norm, np.linalg.norm(batch, axis=1), rtol=1e-6)


@pytest.mark.parametrize(
    ("gvs", "bins", "error", "match"),
    [
        pytest.param([], 3, ValueError, "the list is empty", id="empty"),
        pytest.param(
            [(jnp.ones(2), None)], 0, ValueError, "bins must be an integer >= 1, got 0", id="bins_0"
        ),
        pytest.param(
            [(jnp.ones(2), None)], 2.5, TypeError, "bins must be an integer", id="bins_float"
        ),
        pytest.param([jnp.ones(2)], 3, TypeError, "entry 0 is .*not a .gradient", id="not_a_pair"),
        pytest.param(
            [(jnp.ones(2), None), (jnp.ones(2), None, None)], 3, TypeError, "entry 1", id="triple"
        ),
        pytest.param(
            [(jnp.ones(2, jnp.int32), None)], 3, TypeError, "gradient 0 .*int32", id="int_gradient"
        ),
        pytest.param(
            [(jnp.ones(2, jnp.complex64), None)], 3, TypeError, "real floating", id="complex"
        ),
        pytest.param([([1.0, 2.0], None)], 3, TypeError, "gradient 0 is list", id="list_gradient"),
    ],
)
def test_bad_inputs(gvs: list, bins: float, error: type, match: str) -> None:
    with pytest.raises(error, match=match):
        fg.gradient_summary(gvs, bins=bins)  # type: ignore[arg-type]


class _Recorder:
    def __init__(self) -> None:
        self.calls: list[tuple] = []

    def add_scalar(self, tag: str, scalar_value: float, global_step: int) -> None:
        self.calls.append(("scalar", tag, scalar_value, global_step))

    def add_histogram_raw(self, tag: str, **kwargs: object) -> None:
        self.calls.append(("histogram", tag, kwargs))


def test_writer_skips_none_and_names_tags() -> None:
    g = jnp.array([1.0, 2.0, 3.0])
    s = fg.gradient_summary([(g, None), (None, None), (jnp.array([jnp.nan]), None)], bins=2)
    rec = _Recorder()
    fg.write_gradient_summary(rec, s, step=7, names=["W", "b", "c"], prefix="g")
    tags = [c[1] for c in rec.calls]
    assert tags == [
        "g/W/norm", "g/W/nonfinite_count", "g/W", "g/c/norm", "g/c/nonfinite_count",
        "g/global_norm", "g/none_count",
    ]  # fmt: skip
    hist = rec.calls[2][2]
    assert hist["bucket_counts"] == [1, 2] and hist["bucket_limits"] == [2.0, 3.0]
    assert (hist["num"], hist["sum"], hist["sum_squares"]) == (3, 6.0, 14.0)
    assert rec.calls[-1][2:] == (1, 7)


def test_writer_default_names_are_positions() -> None:
    rec = _Recorder()
    s = fg.gradient_summary([(jnp.ones(2), None)], bins=1)
    fg.write_gradient_summary(rec, s, step=0)
    assert rec.calls[0][1] == "gradients/0/norm"


def test_writer_needs_one_name_per_gradient() -> None:
    s = fg.gradient_summary([(jnp.ones(2), None)], bins=1)
    with pytest.raises(ValueError, match="2 names for 1 gradients"):
        fg.write_gradient_summary(_Recorder(), s, step=0, names=["a", "b"])


def _read_events(logdir: pathlib.Path) -> list:
    """Parses TFRecord event files with tensorboardX's own protobuf (no TensorFlow)."""
    from tensorboardX.proto import event_pb2

    events = []
    for path in logdir.glob("events.out.tfevents.*"):
        data = path.read_bytes()
        pos = 0
        while pos < len(data):
            (length,) = struct.unpack("<Q", data[pos : pos + 8])
            record = data[pos + 12 : pos + 12 + length]
            pos += 12 + length + 4
            events.append(event_pb2.Event.FromString(record))
    return events


def test_tensorboardx_writes_what_the_summary_holds(tmp_path: pathlib.Path) -> None:
    tensorboardx = pytest.importorskip("tensorboardX")
    g = jnp.array([3.0, -4.0, 1.0])
    s = fg.gradient_summary([(g, None), (None, None)], bins=3)
    with tensorboardx.SummaryWriter(str(tmp_path)) as writer:
        fg.write_gradient_summary(writer, s, step=5, names=["W", "b"])
    values = {v.tag: v for e in _read_events(tmp_path) for v in e.summary.value}
    assert values["gradients/W/norm"].simple_value == pytest.approx(np.sqrt(26.0))
    assert values["gradients/none_count"].simple_value == 1
    histo = values["gradients/W"].histo
    assert list(histo.bucket) == np.histogram([3.0, -4.0, 1.0], bins=3)[0].tolist()
    assert (histo.min, histo.max, histo.num) == (-4.0, 3.0, 3)
    assert "gradients/b/norm" not in values


class _NotAWriter:
    def add_scalar(self, tag: str, scalar_value: float, global_step: int) -> None:
        """Has add_scalar only."""


@pytest.fixture(scope="module")
def summary() -> Any:
    """A summary to write, computed once when a test asks (not while every worker collects)."""
    return fg.gradient_summary([(jnp.ones(2), None)], bins=1)


_CALL = r"fg\.write_gradient_summary\(writer, summary, step, names, prefix\): "
_FIX = r".*pass a tensorboardX\.SummaryWriter"


@pytest.mark.parametrize(
    ("arguments", "match"),
    [
        pytest.param(
            dict(writer=object()),
            r"writer \(a object\) has no add_scalar or add_histogram_raw",
            id="not_a_writer",
        ),
        pytest.param(
            dict(writer=_NotAWriter()),
            r"writer \(a _NotAWriter\) has no add_histogram_raw",
            id="half_a_writer",
        ),
        pytest.param(
            dict(summary=[(jnp.ones(2), None)]),
            r"summary is a list, not what fg\.gradient_summary returns",
            id="raw_pairs",
        ),
        pytest.param(dict(step=1.5), r"step must be an integer, got 1\.5", id="float_step"),
        pytest.param(
            dict(names="W"), r"names must be a list of strings, got 'W'", id="names_string"
        ),
        pytest.param(dict(names=[0]), r"names must be a list of strings, got \[0\]", id="int_name"),
        pytest.param(dict(prefix=None), r"prefix must be a string, got None", id="prefix_none"),
        pytest.param(
            dict(writer=object(), summary=[], step="0"),
            r"writer .* has no add_scalar.*; summary is a list.*; step must be an integer",
            id="every_problem_at_once",
        ),
    ],
)
def test_writer_bad_arguments_are_a_type_error_naming_each(
    arguments: dict, match: str, summary: Any
) -> None:
    given = dict(writer=_Recorder(), summary=summary, step=0, names=None, prefix="gradients")
    with pytest.raises(TypeError, match=_CALL + match + _FIX):
        fg.write_gradient_summary(**{**given, **arguments})


def test_writer_refuses_a_traced_summary_and_takes_array_steps(summary: Any) -> None:
    @jax.jit
    def step(g: jax.Array) -> jax.Array:
        fg.write_gradient_summary(_Recorder(), fg.gradient_summary([(g, None)]), step=0)
        return g

    with pytest.raises(TypeError, match=r"summary is traced \(inside jax\.jit\)"):
        step(jnp.ones(2))
    rec = _Recorder()
    fg.write_gradient_summary(rec, summary, step=jnp.int32(3))
    fg.write_gradient_summary(rec, summary, step=np.int64(4))
    steps = [c[-1] if c[0] == "scalar" else c[-1]["global_step"] for c in rec.calls]
    assert {type(s) for s in steps} == {int} and set(steps) == {3, 4}


def test_gradient_summary_of_indexed_slices_summarises_the_values() -> None:
    rows = np.array([[3.0, 0.0], [3.0, 0.0], [1.0, -2.0]], np.float32)
    sparse = fg.IndexedSlices(jnp.asarray(rows), jnp.array([1, 1, 4]), (5, 2))
    s = jax.jit(lambda g: fg.gradient_summary([(g, None)], bins=3))(sparse)
    np.testing.assert_allclose(s.norm[0], np.linalg.norm(rows.astype(np.float64)), rtol=1e-6)
    np.testing.assert_allclose(s.sum[0], rows.sum(), rtol=1e-6)
    assert int(s.histogram[0].sum()) == rows.size  # the rows, not the dense table
