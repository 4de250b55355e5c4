"""The tensor-bundle reader and writer: checksums, round trips, damaged and foreign files.

TensorFlow's own files and bytes are compared in tests/parity/test_tf_checkpoint_parity.py;
here everything is checked without TensorFlow.
"""

import os
import re
from pathlib import Path

import jax.numpy as jnp
import numpy as np
import pytest

from funcgrad.train.checkpoints import _tf_bundle as tb
from funcgrad.train.checkpoints import _tf_job as tj
from funcgrad.train.checkpoints import _tf_proto as tp
from funcgrad.train.checkpoints._crc32c import crc32c
from funcgrad.train.checkpoints._crc32c import mask

DATA = ".data-00000-of-00001"
# Every error for damaged contents ends so: what to do.
FIX = (
    r"; the file is (damaged|truncated|truncated or damaged) — use an intact copy of the "
    r"checkpoint \(or an earlier step's\), or save it again from TensorFlow\.$"
)
# What TensorFlow 2.21's tf.compat.v1.train.Saver wrote for v = [1.0, 2.0] (float32) and
# global_step = 7 (int64): the .index (its data block at byte 0, 63 bytes; the metaindex
# at 68, 8 bytes; the index block at 81, 14 bytes; each block followed by its type byte
# and masked CRC32C), and the .data-00000-of-00001.
TF_INDEX = bytes.fromhex(
    "00000608011a020801000b0b676c6f62616c5f7374657008091200280835bbd79f110001117608011204"
    "120208022008280835593ce53500000000010000000026436458000000000100000000c0f2a1b0000102"
    "77003f000000000100000000273eb9474408510e000000000000000000000000000000000000000000000"
    "00000000000000000000000000057fb808b247547db"
)
TF_DATA = bytes.fromhex("07000000000000000000803f00000040")
TF_VALUES = {"v": np.array([1.0, 2.0], np.float32), "global_step": np.int64(7)}


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
    tj.write_bundle(prefix, _values())
    return prefix


def test_round_trip_of_every_dtype(saved) -> None:
    _assert_same(tb.BundleReader(saved), _values())


def test_round_trip_of_an_index_of_several_blocks(tmp_path) -> None:
    values = {
        f"v{i:05d}/" + "x" * 40: np.float32(i) * np.ones(i % 3, np.float32) for i in range(7000)
    }
    prefix = str(tmp_path / "many")
    tj.write_bundle(prefix, values)
    assert os.path.getsize(prefix + ".index") > 262144  # more than one data block
    _assert_same(tb.BundleReader(prefix), values)


def test_values_given_as_functions_are_made_one_at_a_time_as_written(tmp_path, monkeypatch) -> None:
    """A save copies a state to the host one tensor at a time: each value is made only
    after the one before it has been written."""
    values, events = _values(), []
    temporary = tj._tf_files.temporary

    def recorded(path, pieces):
        def each():
            for piece in pieces:
                yield piece
                events.append("written")  # the file took the piece; the next is asked for

        return temporary(path, each())

    monkeypatch.setattr(tj._tf_files, "temporary", recorded)

    def maker(name: str) -> tj.Tensor:
        return tj.Tensor(values[name], lambda: events.append(name) or values[name])

    prefix = str(tmp_path / "model.ckpt")
    tj.write_bundle(prefix, {name: maker(name) for name in values})
    _assert_same(tb.BundleReader(prefix), values)
    assert events == [e for name in sorted(values) for e in (name, "written")] + ["written"]
    reference = str(tmp_path / "reference")
    tj.write_bundle(reference, values)
    for suffix in (".index", DATA):
        assert Path(prefix + suffix).read_bytes() == Path(reference + suffix).read_bytes()


def test_a_tensor_is_read_into_memory_a_cpu_device_can_take_over(saved) -> None:
    """Read buffers lie at 64-byte boundaries, where jax.device_put aliases them (no copy)."""
    import jax

    reader = tb.BundleReader(saved)
    for name in reader.entries:
        value = reader.read(name)
        assert value.ctypes.data % 64 == 0 or not value.size
        assert value.flags.writeable
    value = reader.read("W")
    assert jax.device_put(value).unsafe_buffer_pointer() == value.ctypes.data


def test_a_large_tensor_is_read_into_mapped_memory_a_cpu_device_can_take_over(tmp_path) -> None:
    import jax

    big = np.random.default_rng(2).standard_normal((1 << 19) + 3).astype(np.float32)  # 2 MiB
    prefix = str(tmp_path / "big")
    tj.write_bundle(prefix, {"big": big, "small": big[:5]})
    value = tb.BundleReader(prefix).read("big")
    np.testing.assert_array_equal(value, big)
    assert value.ctypes.data % 4096 == 0 and value.flags.writeable
    placed = jax.device_put(value)
    assert placed.unsafe_buffer_pointer() == value.ctypes.data
    del value
    np.testing.assert_array_equal(placed, big)  # the memory lives as long as the array


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
    tj.write_bundle(prefix, {"a": np.ones(2)})
    assert tb.latest_checkpoint("caller", str(directory)) is None
    tb.write_checkpoint_state(prefix)
    assert tb.latest_checkpoint("caller", str(directory)) == prefix
    # an absolute path from another machine: the checkpoint is looked for beside the file
    (directory / "checkpoint").write_text('model_checkpoint_path: "/gone/away/model.ckpt-7"\n')
    assert tb.latest_checkpoint("caller", str(directory)) == prefix
    (directory / "checkpoint").write_bytes(b"\xff\xfe garbage")
    assert tb.latest_checkpoint("caller", str(directory)) is None


def test_a_bad_escape_in_the_checkpoint_file(tmp_path) -> None:
    (tmp_path / "checkpoint").write_text('model_checkpoint_path: "model\\xZZ"\n')
    line = 'model_checkpoint_path: "model\\xZZ"'
    fix = 'write the line as model_checkpoint_path: "model.ckpt-1000"'
    with pytest.raises(
        tb.CheckpointFormatError,
        match=rf"^caller: .*checkpoint has a bad escape in {re.escape(repr(line))} \(.*\); {fix}",
    ):
        tb.latest_checkpoint("caller", str(tmp_path))


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


def _footer(index: bytes) -> tuple[tuple[int, int], tuple[int, int], int]:
    """The metaindex and index block handles of a table, and where its padding starts."""
    cursor = tp.Cursor(index, "footer", pos=len(index) - 48)
    meta, block = (cursor.varint(), cursor.varint()), (cursor.varint(), cursor.varint())
    return meta, block, cursor.pos


def test_every_byte_flip_of_the_index_is_caught_unless_in_the_footer_padding(saved) -> None:
    data = Path(saved + ".index").read_bytes()
    uncaught = []
    for i in range(len(data)):
        corrupt = bytearray(data)
        corrupt[i] ^= 0x10
        Path(saved + ".index").write_bytes(corrupt)
        try:
            reader = tb.BundleReader(saved)
        except tb.CheckpointFormatError:
            continue
        _assert_same(reader, _values())
        uncaught.append(i)
    assert uncaught == list(range(_footer(data)[2], len(data) - 8))  # zeros nobody reads


def test_a_flipped_bit_in_the_metaindex_is_refused(saved) -> None:
    data = Path(saved + ".index").read_bytes()
    (offset, size), _, _ = _footer(data)
    for i in range(offset, offset + size + 5):  # the block, its type byte and its CRC
        for bit in range(8):
            corrupt = bytearray(data)
            corrupt[i] ^= 1 << bit
            Path(saved + ".index").write_bytes(corrupt)
            with pytest.raises(
                tb.CheckpointFormatError,
                match=rf"the block at byte {offset} fails its CRC32C check{FIX}",
            ):
                tb.BundleReader(saved)


def _tf_mask(crc: int) -> int:
    """tsl/lib/hash/crc32c.h: ``Mask(crc)``, a rotation by 15 bits plus kMaskDelta."""
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def test_the_masked_crcs_tensorflow_stored(tmp_path) -> None:
    for offset, size in [(0, 63), (68, 8), (81, 14)]:
        stored = int.from_bytes(TF_INDEX[offset + size + 1 : offset + size + 5], "little")
        covered = TF_INDEX[offset : offset + size + 1]  # the block and its type byte
        assert _tf_mask(crc32c(covered)) == stored == mask(crc32c(covered))
    prefix = str(tmp_path / "tf")
    Path(prefix + ".index").write_bytes(TF_INDEX)
    Path(prefix + DATA).write_bytes(TF_DATA)
    entries = tb.BundleReader(prefix).entries
    assert entries["v"].crc == _tf_mask(crc32c(TF_DATA[8:])) == mask(crc32c(TF_DATA[8:]))


def test_tensorflows_own_files_are_read_and_written_byte_for_byte(tmp_path) -> None:
    prefix = str(tmp_path / "tf")
    Path(prefix + ".index").write_bytes(TF_INDEX)
    Path(prefix + DATA).write_bytes(TF_DATA)
    _assert_same(tb.BundleReader(prefix), TF_VALUES)
    tj.write_bundle(str(tmp_path / "fg"), TF_VALUES)
    assert (tmp_path / "fg.index").read_bytes() == TF_INDEX
    assert (tmp_path / f"fg{DATA}").read_bytes() == TF_DATA


def test_damaged_data(saved) -> None:
    path = saved + ".data-00000-of-00001"
    data = bytearray(Path(path).read_bytes())
    entry = tb.BundleReader(saved).entries["W"]
    data[entry.offset + 5] ^= 0x01
    Path(path).write_bytes(data)
    reader = tb.BundleReader(saved)
    with pytest.raises(
        tb.CheckpointFormatError, match=rf"^{re.escape(path)}: 'W' fails its CRC32C check{FIX}"
    ):
        reader.read("W")
    np.testing.assert_array_equal(reader.read("layer1/bias"), _values()["layer1/bias"])
    Path(path).write_bytes(data[: entry.offset])
    end = entry.offset + entry.size
    with pytest.raises(
        tb.CheckpointFormatError,
        match=rf"^{re.escape(path)}: 'W' is bytes {entry.offset}..{end}, but it ends at "
        rf"{entry.offset}{FIX}",
    ):
        reader.read("W")
    os.remove(path)
    with pytest.raises(tb.CheckpointFormatError, match=r"data file .* is missing"):
        reader.read("W")


def _index(prefix: str, header: bytes, entries: dict[str, tp.Entry]) -> None:
    """An index of these entries (a sliced one gets one slice, TensorFlow's field 7)."""
    pairs = [(b"", header)] + [
        (k.encode(), e.encode() + (tp.put_bytes(7, b"") if e.sliced else b""))
        for k, e in sorted(entries.items())
    ]
    Path(prefix + ".index").write_bytes(tb._build_table(pairs))


_HEADER = tp.put_int(1, 1) + tp.put_bytes(3, tp.put_int(1, 1))


@pytest.mark.parametrize(
    ("shape", "size"),
    [((2**40, 2**20), 2**62), ((2**62,), 4), ((3,), 2**62)],
    ids=["huge_both", "huge_shape", "huge_size"],
)
def test_absurd_sizes_are_refused_before_any_allocation(tmp_path, shape, size) -> None:
    prefix = str(tmp_path / "evil")
    tj.write_bundle(prefix, {"x": np.zeros(1, np.float32)})
    _index(prefix, _HEADER, {"x": tp.Entry(1, shape, 0, 0, size, 0, False)})
    with pytest.raises(
        tb.CheckpointFormatError, match=rf"(does not fit its shape or the shards|ends at 4){FIX}"
    ):
        tb.BundleReader(prefix).read("x")


def test_an_offset_past_any_file_says_so(tmp_path) -> None:
    prefix = str(tmp_path / "evil")
    tj.write_bundle(prefix, {"x": np.zeros(2, np.float32)})
    _index(prefix, _HEADER, {"x": tp.Entry(1, (2,), 0, 2**63 - 1, 8, 0, False)})
    with pytest.raises(
        tb.CheckpointFormatError,
        match=rf"{DATA}: 'x' is bytes 9223372036854775807..9223372036854775815, but it ends "
        rf"at 8{FIX}",
    ):
        tb.BundleReader(prefix).read("x")


@pytest.mark.parametrize(
    ("header", "match"),
    [
        (tp.put_int(1, 1) + tp.put_bytes(3, tp.put_int(2, 99)), "format version"),
        (tp.put_int(1, 1) + tp.put_int(2, 1), "big-endian"),
        (tp.put_bytes(3, tp.put_int(1, 1)), "0 shards"),
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
        (tp.Entry(7, (2,), 0, 0, 8, 0, False), "non-numeric tensor"),
        # a partitioned variable's entry (field 7) whose slices are missing
        (tp.Entry(1, (2,), 0, 0, 0, 0, True), "its slices cover 0 of its 2 values"),
    ],
    ids=["string", "partitioned_without_slices"],
)
def test_tensors_funcgrad_does_not_read(tmp_path, entry: tp.Entry, match: str) -> None:
    _index(str(tmp_path / "x"), _HEADER, {"s": entry})
    with pytest.raises(tb.CheckpointFormatError, match=match):
        tb.BundleReader(str(tmp_path / "x")).read("s")


# Each way an index can be damaged, and the error: the file, what is wrong, what to do.
def _pairs(*pairs: tuple[bytes, bytes]):
    def damage(prefix: str) -> None:
        Path(prefix + ".index").write_bytes(tb._build_table(pairs))

    return damage


def _edit_index(edit):
    def damage(prefix: str) -> None:
        index = bytearray(Path(prefix + ".index").read_bytes())
        edit(index)
        Path(prefix + ".index").write_bytes(index)

    return damage


def _index_block(contents):
    """A damage: the index block replaced by ``contents(its handles)``, CRC and footer
    made to match."""

    def edit(index: bytearray) -> None:
        meta, (offset, size), _ = _footer(bytes(index))
        handles = [value for _, value in tb._pairs(memoryview(index[offset : offset + size]), "")]
        block = contents(handles)
        trailer = bytes([0]) + mask(crc32c(block + b"\0")).to_bytes(4, "little")
        footer = b"".join(tp.varint(n) for n in (*meta, offset, len(block)))
        index[offset:] = block + trailer + footer.ljust(40, b"\0") + index[-8:]

    return _edit_index(edit)


def _listing(*handles: bytes) -> bytes:
    block = tb._BlockBuilder(1)
    for i, handle in enumerate(handles):
        block.add(bytes([ord("a") + i]), handle)
    return block.finish()


def _compressed(index: bytearray) -> None:
    _, (offset, size), _ = _footer(bytes(index))
    data = tp.Cursor(bytes(index[offset : offset + size]), "")
    data.varint(), data.varint(), data.varint()  # the first entry's lengths: 0, 1, handle
    data.take(1)
    start, length = data.varint(), data.varint()
    index[start + length] = 1  # the type byte, Snappy; its CRC made to match
    covered = bytes(index[start : start + length + 1])
    index[start + length + 1 : start + length + 5] = mask(crc32c(covered)).to_bytes(4, "little")


def _read_everything(prefix: str) -> None:
    reader = tb.BundleReader(prefix)
    for name in reader.entries:
        reader.read(name)


_ENTRY = tp.Entry(1, (2,), 0, 0, 8, 0, False).encode()
DAMAGES = [
    pytest.param(
        _pairs((b"", _HEADER), (b"x", b"\x08")),
        "a truncated or overlong varint at byte 1 of a record",
        id="truncated_varint",
    ),
    pytest.param(
        _pairs((b"", _HEADER), (b"x", b"\x0b")),
        "a protobuf field of wire type 3 at byte 1 of a record",
        id="wire_type",
    ),
    pytest.param(
        _pairs((b"", _HEADER), (b"x", tp.put_bytes(1, b"ab"))),
        "a number field holds bytes",
        id="bytes_for_a_number",
    ),
    pytest.param(
        _pairs((b"", _HEADER), (b"x", tp.put_int(2, 5))),
        "a message field holds a number",
        id="number_for_a_message",
    ),
    pytest.param(
        _pairs((b"", _HEADER), (b"x", tp.put_bytes(2, tp.put_int(3, 1)))),
        "a tensor's shape has an unknown rank",
        id="unknown_rank",
    ),
    pytest.param(
        _pairs((b"", _HEADER), (b"x", tp.Entry(1, (2,), 0, -8, 8, 0, False).encode())),
        "a negative size, offset or dimension",
        id="negative_offset",
    ),
    pytest.param(
        _pairs((b"", tp.put_bytes(3, tp.put_int(1, 1)))),
        "the header states 0 shards",
        id="no_shards",
    ),
    pytest.param(_pairs((b"x", _ENTRY)), "the bundle header is missing", id="no_header"),
    pytest.param(
        _pairs((b"", _HEADER), (b"y", _ENTRY), (b"x", _ENTRY)),
        "its keys are out of order at b'x'",
        id="keys_out_of_order",
    ),
    pytest.param(
        _edit_index(lambda index: index.__setitem__(3, index[3] ^ 1)),
        "the block at byte 0 fails its CRC32C check",
        id="block_crc",
    ),
    pytest.param(
        _edit_index(_compressed),
        "a compressed block, which TensorFlow never writes",
        id="compressed_block",
    ),
    pytest.param(
        _index_block(lambda _: _listing(tp.varint(0) + tp.varint(10**6))),
        r"a block \(bytes 0..1000005\) runs past the end of the \d+ bytes before the "
        "footer",
        id="block_past_the_end",
    ),
    pytest.param(
        _index_block(lambda handles: _listing(handles[0], handles[0])),
        "the block at byte 0 overlaps the one before it",
        id="blocks_overlap",
    ),
    pytest.param(
        _index_block(lambda _: bytes(4)),
        "a block without restart points at byte 0 of a record",
        id="no_restart_points",
    ),
    pytest.param(
        _pairs((b"", _HEADER), (b"x", tp.Entry(1, (3,), 0, 0, 8, 0, False).encode())),
        "'x'\\]: its index entry does not fit its shape or the shards",
        id="entry_not_its_shape",
    ),
]


@pytest.mark.parametrize(("damage", "what"), DAMAGES)
def test_damaged_indexes_say_which_file_and_what_to_do(saved, damage, what: str) -> None:
    damage(saved)
    with pytest.raises(tb.CheckpointFormatError, match=rf"^{re.escape(saved)}\.index.*{what}{FIX}"):
        _read_everything(saved)


def test_a_restore_places_each_tensor_before_it_reads_the_next(tmp_path, monkeypatch) -> None:
    """Its memory grows by the restored state and one tensor, not by the checkpoint."""
    import jax

    import funcgrad as fg

    opt = fg.train.MomentumOptimizer(0.1, momentum=0.9)
    state = opt.init({"W": jnp.ones((3, 2)), "b": jnp.zeros(2)})
    prefix = fg.train.save_tf_checkpoint(str(tmp_path / "model.ckpt"), state, opt)
    events, read, device_put = [], tb.BundleReader.read, jax.device_put
    monkeypatch.setattr(tb.BundleReader, "read", lambda self, n: events.append(n) or read(self, n))
    monkeypatch.setattr(
        jax, "device_put", lambda *a, **k: events.append("placed") or device_put(*a, **k)
    )
    restored = fg.train.restore_tf_checkpoint(prefix, state, opt)
    names = ["W", "W/Momentum", "b", "b/Momentum", "global_step"]
    assert sorted(events[::2]) == sorted(names) and events[1::2] == ["placed"] * len(names)
    for got, want in zip(jax.tree.leaves(restored), jax.tree.leaves(state), strict=True):
        np.testing.assert_array_equal(got, want)
