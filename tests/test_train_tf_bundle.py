"""The tensor-bundle reader and writer: checksums, round trips, damaged and foreign files.

TensorFlow's own files and bytes are compared in tests/parity/test_tf_checkpoint_parity.py;
here everything is checked without TensorFlow.
"""

import os
from pathlib import Path

import jax.numpy as jnp
import numpy as np
import pytest

from funcgrad.train.checkpoints import _tf_bundle as tb
from funcgrad.train.checkpoints._crc32c import crc32c

_rng = np.random.default_rng(0)


def _values() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(1)
    return {
        "W": rng.standard_normal((3, 4)).astype(np.float32),
        "layer1/bias": rng.standard_normal(5),
        "bf16": rng.standard_normal(7).astype(jnp.bfloat16),
        "half": np.ones((2, 2), np.float16),
        "i8": np.array([-3, 4], np.int8),
        "u64": np.array([2**64 - 1], np.uint64),
        "flag": np.array([True, False]),
        "c64": np.array([1 + 2j], np.complex64),
        "scalar": np.float32(3.5),
        "empty": np.zeros((0, 3), np.float32),
        "global_step": np.int64(1234),
    }


def _assert_same(reader: tb.BundleReader, values: dict) -> None:
    assert sorted(reader.entries) == sorted(values)
    for name, value in values.items():
        got = reader.read(name)
        assert got.dtype == np.asarray(value).dtype and got.shape == np.shape(value), name
        np.testing.assert_array_equal(got, value, err_msg=name)


@pytest.fixture
def saved(tmp_path) -> str:
    prefix = str(tmp_path / "model.ckpt")
    tb.write_bundle(prefix, _values())
    return prefix


def test_crc32c_known_values() -> None:
    assert crc32c(b"") == 0
    assert crc32c(b"123456789") == 0xE3069283
    assert crc32c(bytes(32)) == 0x8A9136AA  # RFC 3720, B.4
    assert crc32c(b"\xff" * 32) == 0x62A8AB43
    assert crc32c(bytes(range(32))) == 0x46DD794E


@pytest.mark.parametrize("size", [1, 2047, 2048, 2049, 4096 + 3, 65536, 300_001])
def test_crc32c_in_lanes_equals_byte_by_byte(size: int) -> None:
    data = _rng.integers(0, 256, size, dtype=np.uint8).tobytes()
    register = 0xFFFFFFFF
    for b in data:  # the textbook reflected CRC, bit by bit
        register ^= b
        for _ in range(8):
            register = (register >> 1) ^ (0x82F63B78 if register & 1 else 0)
    assert crc32c(data) == register ^ 0xFFFFFFFF
    cut = size // 3
    assert crc32c(data[cut:], crc32c(data[:cut])) == crc32c(data)


def test_round_trip_of_every_dtype(saved) -> None:
    _assert_same(tb.BundleReader(saved), _values())


def test_round_trip_of_an_index_of_several_blocks(tmp_path) -> None:
    values = {
        f"v{i:05d}/" + "x" * 40: np.float32(i) * np.ones(i % 3, np.float32) for i in range(7000)
    }
    prefix = str(tmp_path / "many")
    tb.write_bundle(prefix, values)
    assert os.path.getsize(prefix + ".index") > 262144  # more than one data block
    _assert_same(tb.BundleReader(prefix), values)


def test_write_leaves_only_the_checkpoint(saved, tmp_path) -> None:
    tb.write_checkpoint_state(saved)
    assert sorted(os.listdir(tmp_path)) == [
        "checkpoint",
        "model.ckpt.data-00000-of-00001",
        "model.ckpt.index",
    ]


def test_latest_checkpoint(tmp_path) -> None:
    directory = tmp_path / 'dir "q" é'
    prefix = str(directory / "model.ckpt-7")
    tb.write_bundle(prefix, {"a": np.ones(2)})
    assert tb.latest_checkpoint("caller", str(directory)) is None
    tb.write_checkpoint_state(prefix)
    assert tb.latest_checkpoint("caller", str(directory)) == prefix
    # an absolute path from another machine: the checkpoint is looked for beside the file
    (directory / "checkpoint").write_text('model_checkpoint_path: "/gone/away/model.ckpt-7"\n')
    assert tb.latest_checkpoint("caller", str(directory)) == prefix
    (directory / "checkpoint").write_bytes(b"\xff\xfe garbage")
    assert tb.latest_checkpoint("caller", str(directory)) is None


@pytest.mark.parametrize(
    "content",
    [b"", b"hello", b"model_checkpoint_path: 'x'\n" * 3, bytes(100)],
    ids=["empty", "text", "state_file", "zeros"],
)
def test_not_an_index(tmp_path, content: bytes) -> None:
    (tmp_path / "x.index").write_bytes(content)
    with pytest.raises(tb.CheckpointFormatError, match="not the index of a TensorFlow V2"):
        tb.BundleReader(str(tmp_path / "x"))


def test_every_truncation_of_the_index(saved) -> None:
    data = Path(saved + ".index").read_bytes()
    for n in range(len(data)):
        Path(saved + ".index").write_bytes(data[:n])
        with pytest.raises(tb.CheckpointFormatError):
            tb.BundleReader(saved)


def test_every_byte_flip_of_the_index_is_caught_or_harmless(saved) -> None:
    data = Path(saved + ".index").read_bytes()
    caught = 0
    for i in range(len(data)):
        corrupt = bytearray(data)
        corrupt[i] ^= 0x10
        Path(saved + ".index").write_bytes(corrupt)
        try:
            reader = tb.BundleReader(saved)
            _assert_same(reader, _values())  # footer padding: nothing changes
        except tb.CheckpointFormatError:
            caught += 1
    assert caught > 0.8 * len(data)  # the rest: footer padding, the unread metaindex


def test_damaged_data(saved) -> None:
    path = saved + ".data-00000-of-00001"
    data = bytearray(Path(path).read_bytes())
    entry = tb.BundleReader(saved).entries["W"]
    data[entry.offset + 5] ^= 0x01
    Path(path).write_bytes(data)
    reader = tb.BundleReader(saved)
    with pytest.raises(tb.CheckpointFormatError, match=r"'W' fails its CRC32C check"):
        reader.read("W")
    np.testing.assert_array_equal(reader.read("layer1/bias"), _values()["layer1/bias"])
    Path(path).write_bytes(data[: entry.offset])
    with pytest.raises(tb.CheckpointFormatError, match="truncated"):
        reader.read("W")
    os.remove(path)
    with pytest.raises(tb.CheckpointFormatError, match=r"data file .* is missing"):
        reader.read("W")


def _index(prefix: str, header: bytes, entries: dict[str, tb.Entry]) -> None:
    """An index of these entries (a sliced one gets one slice, TensorFlow's field 7)."""
    pairs = [(b"", header)] + [
        (k.encode(), e.encode() + (tb._put_bytes(7, b"") if e.sliced else b""))
        for k, e in sorted(entries.items())
    ]
    Path(prefix + ".index").write_bytes(tb._build_table(pairs))


_HEADER = tb._put_int(1, 1) + tb._put_bytes(3, tb._put_int(1, 1))


@pytest.mark.parametrize(
    ("shape", "size"),
    [((2**40, 2**20), 2**62), ((2**62,), 4), ((3,), 2**62)],
    ids=["huge_both", "huge_shape", "huge_size"],
)
def test_absurd_sizes_are_refused_before_any_allocation(tmp_path, shape, size) -> None:
    prefix = str(tmp_path / "evil")
    tb.write_bundle(prefix, {"x": np.zeros(1, np.float32)})
    _index(prefix, _HEADER, {"x": tb.Entry(1, shape, 0, 0, size, 0, False)})
    with pytest.raises(tb.CheckpointFormatError, match=r"does not fit its shape|truncated"):
        tb.BundleReader(prefix).read("x")


@pytest.mark.parametrize(
    ("header", "match"),
    [
        (tb._put_int(1, 1) + tb._put_bytes(3, tb._put_int(2, 99)), "format version"),
        (tb._put_int(1, 1) + tb._put_int(2, 1), "big-endian"),
        (tb._put_bytes(3, tb._put_int(1, 1)), "0 shards"),
    ],
    ids=["future_version", "big_endian", "no_shards"],
)
def test_headers_refused(tmp_path, header: bytes, match: str) -> None:
    _index(str(tmp_path / "x"), header, {})
    with pytest.raises(tb.CheckpointFormatError, match=match):
        tb.BundleReader(str(tmp_path / "x"))


@pytest.mark.parametrize(
    ("entry", "match"),
    [
        (tb.Entry(7, (2,), 0, 0, 8, 0, False), "non-numeric tensor"),
        (tb.Entry(1, (2,), 0, 0, 0, 0, True), "partitioned variable"),  # slices: field 7
    ],
    ids=["string", "partitioned"],
)
def test_tensors_funcgrad_does_not_read(tmp_path, entry: tb.Entry, match: str) -> None:
    _index(str(tmp_path / "x"), _HEADER, {"s": entry})
    with pytest.raises(tb.CheckpointFormatError, match=match):
        tb.BundleReader(str(tmp_path / "x")).read("s")
