"""Partitioned variables in tensor bundles: slice keys, round trips, damaged slices.

TensorFlow's own files and bytes are compared in tests/parity/test_tf_partitioned_parity.py;
here everything is checked without TensorFlow.
"""

from pathlib import Path

import jax.numpy as jnp
import numpy as np
import pytest

import funcgrad as fg
from funcgrad.train.checkpoints import _tf_bundle as tb
from funcgrad.train.checkpoints import _tf_job as tj
from funcgrad.train.checkpoints import _tf_proto as tp
from funcgrad.train.checkpoints import _tf_slices as ts
from funcgrad.train.checkpoints._crc32c import crc32c
from funcgrad.train.checkpoints._crc32c import mask

# TensorFlow 2.21's key for slice rows 67..133, columns 0..1 of "big" (a Saver's index).
TF_KEY = b"\x00big\x00\x01\x01\x02\xc0C\xc0C\x80\x82"


def test_slice_keys_are_tensorflows():
    assert ts.slice_key("big", ((67, 67), (0, 2))) == TF_KEY
    assert ts.slice_key("W", ((4, 3), (0, 3))) == b"\x00W\x00\x01\x01\x02\x84\x83\x80\x83"


@pytest.mark.parametrize(
    "number", [0, 1, 63, 64, 8191, 8192, 2**40, 2**62, -1, -64, -65, -8193, -(2**62)]
)
def test_slice_keys_round_trip(number):
    extents = ((number, -1), (5, number))
    name = "a/\x00b\xff"  # NUL and 0xFF are escaped in the name
    assert ts._parse_key(ts.slice_key(name, extents), "x") == (name, extents)


@pytest.mark.parametrize(
    "key",
    [
        b"\x00W",
        b"\x00W\x00\x01",
        b"\x00W\x00\x01\x01\x02\x80",
        TF_KEY + b"\x80",
        b"\x00W\x00\x01\x05",
    ],
)
def test_a_malformed_slice_key_is_refused(key):
    with pytest.raises(tb.CheckpointFormatError, match="a malformed slice key"):
        ts._parse_key(key, "x.index")


def test_a_partitioned_tensor_reads_back_whole(tmp_path):
    values = {
        "E": np.arange(30, dtype=np.float32).reshape(10, 3),
        "E/Adam": -np.arange(30, dtype=np.float32).reshape(10, 3),
        "b": np.ones(4, np.int64),
    }
    prefix = str(tmp_path / "m.ckpt")
    tj.write_bundle(
        prefix, values, ts.expand("save", {"E": 4}, {k: v.shape for k, v in values.items()})
    )
    reader = tb.BundleReader(prefix)
    assert sorted(reader.entries) == ["E", "E/Adam", "b"]
    assert [e for e, _ in reader.slices["E"]] == [((0, 3), (0, 3)), ((3, 3), (0, 3)),
                                                  ((6, 2), (0, 3)), ((8, 2), (0, 3))]  # fmt: skip
    for name, value in values.items():
        np.testing.assert_array_equal(reader.read(name), value)


def _write_slices(prefix: str, shape: tuple[int, ...], pieces: list, dtype: int = 1) -> None:
    """A checkpoint of one partitioned tensor ``E`` of ``shape`` (TensorFlow dtype enum
    ``dtype``) stored as ``pieces``, ``(extents, array)`` each, written as given: each
    slice's CRC32C valid, whatever the slices are."""
    data, pairs, protos = b"", [], []
    for extents, array in pieces:
        raw = np.ascontiguousarray(array).tobytes()
        crc = mask(crc32c(raw))
        entry = tp.Entry(tp.ENUMS[array.dtype], array.shape, 0, len(data), len(raw), crc, False)
        pairs.append((ts.slice_key("E", extents), entry.encode()))
        data += raw
        extent = [tp.put_int(1, s) + tp.varint(2 << 3) + tp.varint(n) for s, n in extents]
        protos.append(b"".join(tp.put_bytes(1, e) for e in extent))
    full = tp.put_int(1, dtype) + tp.put_bytes(2, tp.shape_proto(shape))
    pairs.append((b"E", full + b"".join(tp.put_bytes(7, p) for p in protos)))
    pairs.append((b"", tp.header(1)))
    Path(prefix + ".index").write_bytes(tb._build_table(sorted(pairs)))
    Path(prefix + ".data-00000-of-00001").write_bytes(data)


def test_overlapping_slices_are_refused(tmp_path):
    """Rows 0-1 and 1-2 of a 4-row tensor: as many values as it has, row 3 uncovered."""
    prefix = str(tmp_path / "m.ckpt")
    rows = np.arange(8, dtype=np.float32).reshape(4, 2)
    _write_slices(prefix, (4, 2), [(((0, 2), (0, 2)), rows[0:2]), (((1, 2), (0, 2)), rows[1:3])])
    with pytest.raises(tb.CheckpointFormatError, match=r"its slices .* overlap; the file is"):
        tb.BundleReader(prefix).read("E")
    opt = fg.train.GradientDescentOptimizer(0.1)
    template = opt.init({"E": jnp.zeros((4, 2))})
    with pytest.raises(ValueError, match=r"restore_tf_checkpoint.*'E'.* overlap.*intact copy"):
        fg.train.restore_tf_checkpoint(prefix, template, opt, name_map={"global_step": None})


def test_a_slice_stored_in_another_dtype_is_refused(tmp_path):
    """int32 bits in a float32 tensor's slice: never reinterpreted, never cast."""
    prefix = str(tmp_path / "m.ckpt")
    _write_slices(
        prefix,
        (4, 2),
        [
            (((0, 2), (0, 2)), np.ones((2, 2), np.float32)),
            (((2, 2), (0, 2)), np.ones((2, 2), np.int32)),
        ],
    )
    with pytest.raises(tb.CheckpointFormatError, match=r"a slice stored as int32 in a float32"):
        tb.BundleReader(prefix).read("E")


def test_slices_that_do_not_cover_the_tensor_are_refused(tmp_path):
    prefix = str(tmp_path / "m.ckpt")
    _write_slices(prefix, (4, 2), [(((0, 2), (0, 2)), np.ones((2, 2), np.float32))])
    with pytest.raises(tb.CheckpointFormatError, match="its slices cover 4 of its 8 values"):
        tb.BundleReader(prefix).read("E")


def test_slices_along_any_axis_read_back_whole(tmp_path):
    """Slices need not be rows: columns, and blocks of both, as a mesh shards a table."""
    prefix = str(tmp_path / "m.ckpt")
    value = np.arange(24, dtype=np.float32).reshape(4, 6)
    blocks = [((r, 2), (c, 3)) for r in (0, 2) for c in (3, 0)]  # in no particular order
    pieces = [(b, value[r : r + 2, c : c + 3]) for b in blocks for (r, _), (c, _) in [b]]
    _write_slices(prefix, (4, 6), pieces)
    np.testing.assert_array_equal(tb.BundleReader(prefix).read("E"), value)
