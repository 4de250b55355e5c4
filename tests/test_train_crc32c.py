"""CRC-32C against published test vectors and the textbook bit-by-bit definition."""

import numpy as np
import pytest

from funcgrad.train.checkpoints._crc32c import crc32c

_rng = np.random.default_rng(0)


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
