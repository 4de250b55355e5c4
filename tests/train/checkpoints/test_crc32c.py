"""CRC-32C against published test vectors, the textbook bit-by-bit definition, and
``google-crc32c`` (the hardware CRC the checkpoints use) against our NumPy reference."""

import itertools

import google_crc32c
import numpy as np
import pytest

from funcgrad.train.checkpoints import _crc32c
from funcgrad.train.checkpoints._crc32c import crc32c
from funcgrad.train.checkpoints._crc32c import mask
from funcgrad.train.checkpoints._crc32c import numpy_crc32c

_rng = np.random.default_rng(0)


@pytest.mark.parametrize("crc", [crc32c, numpy_crc32c], ids=["library", "numpy"])
def test_crc32c_known_values(crc) -> None:
    assert crc(b"") == 0
    assert crc(b"123456789") == 0xE3069283
    assert crc(bytes(32)) == 0x8A9136AA  # RFC 3720, B.4
    assert crc(b"\xff" * 32) == 0x62A8AB43
    assert crc(bytes(range(32))) == 0x46DD794E


def test_the_library_is_the_hardware_one() -> None:
    """Where the C extension is missing, crc32c falls back to NumPy (its design note)."""
    assert google_crc32c.implementation == "c"


@pytest.mark.parametrize("size", [1, 2047, 2048, 2049, 4096 + 3, 65536, 300_001])
def test_crc32c_in_lanes_equals_byte_by_byte(size: int) -> None:
    data = _rng.integers(0, 256, size, dtype=np.uint8).tobytes()
    register = 0xFFFFFFFF
    for b in data:  # the textbook reflected CRC, bit by bit
        register ^= b
        for _ in range(8):
            register = (register >> 1) ^ (0x82F63B78 if register & 1 else 0)
    assert numpy_crc32c(data) == register ^ 0xFFFFFFFF
    cut = size // 3
    assert numpy_crc32c(data[cut:], numpy_crc32c(data[:cut])) == numpy_crc32c(data)


def _tf_mask(crc: int) -> int:
    """tsl/lib/hash/crc32c.h: ``Mask(crc)``, a rotation by 15 bits plus kMaskDelta."""
    return ((((crc >> 15) | (crc << 17)) & 0xFFFFFFFF) + 0xA282EAD8) & 0xFFFFFFFF


def test_the_library_equals_the_reference_on_random_bytes() -> None:
    sizes = [*range(0, 70), 255, 256, 257, 1023, 2047, 2048, 2049, 4099, 65537, 1 << 20, 3_000_017]
    for size in sizes:
        data = _rng.integers(0, 256, size, dtype=np.uint8)
        start = int(_rng.integers(0, 2**32))
        want = numpy_crc32c(data.tobytes(), start)
        for given in (data, data.tobytes(), bytearray(data.tobytes()), memoryview(data)):
            assert crc32c(given, start) == want, size
        assert mask(crc32c(data)) == _tf_mask(numpy_crc32c(data)) == mask(numpy_crc32c(data))


def test_arrays_of_any_dtype_are_their_bytes() -> None:
    for dtype in (np.float32, np.int64, np.bool_, np.float16):
        array = _rng.integers(0, 2, (3, 5)).astype(dtype)
        assert crc32c(array) == numpy_crc32c(array.tobytes()) == crc32c(array.tobytes())


@pytest.mark.parametrize("cuts", [(), (0,), (1, 7), (100, 101, 4000), (5000,)])
def test_the_crc_of_a_message_from_the_registers_of_its_parts(cuts) -> None:
    message = np.random.default_rng(3).integers(0, 256, 5000, dtype=np.uint8)
    edges = [0, *cuts, message.size]
    register = 0
    for start, stop in itertools.pairwise(edges):
        register ^= _crc32c.shift(_crc32c.raw(message[start:stop]), message.size - stop)
    assert _crc32c.finish(register, message.size) == _crc32c.crc32c(message)
    masked = message.copy()
    masked[100:4000] = 0  # a part's register: the message's with every other byte zero
    part = _crc32c.raw(masked)
    assert part == _crc32c.shift(_crc32c.raw(message[:100]), 4900) ^ _crc32c.raw(message[4000:])
