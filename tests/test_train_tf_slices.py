"""Partitioned variables in tensor bundles: slice keys, round trips, damaged slices.

TensorFlow's own files and bytes are compared in tests/parity/test_tf_partitioned_parity.py;
here everything is checked without TensorFlow.
"""

import numpy as np
import pytest

from funcgrad.train.checkpoints import _tf_bundle as tb
from funcgrad.train.checkpoints import _tf_slices as ts

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
    tb.write_bundle(
        prefix, values, ts.expand("save", {"E": 4}, {k: v.shape for k, v in values.items()})
    )
    reader = tb.BundleReader(prefix)
    assert sorted(reader.entries) == ["E", "E/Adam", "b"]
    assert [e for e, _ in reader.slices["E"]] == [((0, 3), (0, 3)), ((3, 3), (0, 3)),
                                                  ((6, 2), (0, 3)), ((8, 2), (0, 3))]  # fmt: skip
    for name, value in values.items():
        np.testing.assert_array_equal(reader.read(name), value)


def test_slices_that_do_not_cover_the_tensor_are_refused(tmp_path, monkeypatch):
    split = ts.split
    monkeypatch.setattr(ts, "split", lambda *a: (split(*a)[0], split(*a)[1][:1]))
    prefix = str(tmp_path / "m.ckpt")
    tb.write_bundle(prefix, {"E": np.ones((4, 2), np.float32)}, {"E": 2})
    with pytest.raises(tb.CheckpointFormatError, match="its slices cover 4 of its 8 values"):
        tb.BundleReader(prefix).read("E")
