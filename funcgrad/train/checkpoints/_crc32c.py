"""CRC-32C, as TensorFlow computes (``crc32c::Extend``) and stores (``crc32c::Mask``) it.

Design note
-----------
What it follows: the Castagnoli CRC (reflected polynomial ``0x82F63B78``, RFC 3720
appendix B.4) of TensorFlow's ``tsl/lib/hash/crc32c``, and its mask, a 15-bit rotation
plus ``0xa282ead8``, applied to every CRC a checkpoint file stores (LevelDB's rule, so
that a CRC of bytes that hold CRCs stays meaningful).

How: ``google-crc32c`` (Google's, the CPU's CRC32 instruction: some 10 GB/s on one core)
where its C extension is installed; elsewhere the NumPy implementation below (some
650 MB/s; faster than that package's pure-Python fallback), which tests also use as the
reference for the library.

Parts: the CRC register is linear in the bytes, so the CRC-32C of a message can be put
together from the registers of its parts, each computed where the part is
(:func:`raw`, :func:`shift`, :func:`finish`): how a checkpoint of an array spread over
several hosts is checked without bringing it to one.

What it assumes: nothing of its input; any bytes-like object or C-contiguous NumPy array.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

import numpy as np

_cext: ModuleType | None
try:
    from google_crc32c import cext as _cext  # the C extension; absent: no hardware CRC
except ImportError:  # pragma: no cover - wheels exist for the platforms CI runs on
    _cext = None

# CRC-32C (Castagnoli, reflected polynomial 0x82F63B78): TensorFlow's crc32c::Extend.
# Below _SMALL bytes a table loop; above, the input is cut into _LANE-byte lanes whose
# CRCs NumPy computes side by side (four bytes a step), then combined pairwise with the
# linear "append n zero bytes" operator, as zlib's crc32_combine.  ~650 MB/s.
_POLY, _SMALL, _LANE, _CHUNK = 0x82F63B78, 2048, 256, 1 << 22
_T0 = np.arange(256, dtype=np.uint32)
for _ in range(8):
    _T0 = np.where(_T0 & 1, (_T0 >> 1) ^ np.uint32(_POLY), _T0 >> 1).astype(np.uint32)
_T0_LIST = [int(x) for x in _T0]
_cache: dict[Any, Any] = {}


def _word_tables() -> tuple[np.ndarray, np.ndarray]:
    """One 32-bit step of the register ``s``: ``lo[s & 0xFFFF] ^ hi[s >> 16]``."""
    if "word" not in _cache:
        t1 = (_T0 >> 8) ^ _T0[_T0 & 0xFF]
        t2 = (t1 >> 8) ^ _T0[t1 & 0xFF]
        t3 = (t2 >> 8) ^ _T0[t2 & 0xFF]
        x = np.arange(1 << 16, dtype=np.uint32)
        _cache["word"] = (t3[x & 0xFF] ^ t2[x >> 8], t1[x & 0xFF] ^ _T0[x >> 8])
    return _cache["word"]


def _apply(columns: tuple[int, ...], x: int) -> int:
    """The GF(2) matrix with these 32 columns times the vector ``x``."""
    out, i = 0, 0
    while x:
        out ^= columns[i] if x & 1 else 0
        x, i = x >> 1, i + 1
    return out


def _zeros(k: int) -> tuple[int, ...]:
    """The operator "feed 2**k zero bytes" on a raw register, as 32 columns."""
    if k not in _cache:
        if k == 0:
            _cache[k] = tuple(_T0_LIST[(1 << i) & 0xFF] ^ ((1 << i) >> 8) for i in range(32))
        else:
            half = _zeros(k - 1)
            _cache[k] = tuple(_apply(half, c) for c in half)
    return _cache[k]


def _shift(register: int, n: int) -> int:
    """The raw register after ``n`` zero bytes."""
    k = 0
    while n and register:
        register = _apply(_zeros(k), register) if n & 1 else register
        n, k = n >> 1, k + 1
    return register


def _shift_tables(n: int) -> np.ndarray:
    """(4, 256) tables applying "feed ``n`` (a power of 2) zero bytes" byte by byte."""
    if ("shift", n) not in _cache:
        columns = np.array(_zeros(n.bit_length() - 1), np.uint32).reshape(4, 8)
        bits = ((np.arange(256)[:, None] >> np.arange(8)) & 1).astype(bool)
        _cache["shift", n] = np.stack(
            [np.bitwise_xor.reduce(np.where(bits, c, np.uint32(0)), axis=1) for c in columns]
        )
    return _cache["shift", n]


def _lanes(block: np.ndarray) -> int:
    """The raw register (from 0) after ``block``, whose size is a multiple of _LANE."""
    lo, hi = _word_tables()
    s = np.zeros(block.size // _LANE, np.uint32)
    for row in block.view("<u4").reshape(s.size, _LANE // 4).T:
        s ^= row
        s = lo[s & 0xFFFF] ^ hi[s >> 16]
    width = _LANE
    while s.size > 1:
        if s.size % 2:  # a zero lane in front changes nothing on a zero register
            s = np.concatenate([np.zeros(1, np.uint32), s])
        t, left = _shift_tables(width), s[0::2]
        s = s[1::2] ^ t[0][left & 0xFF] ^ t[1][(left >> 8) & 0xFF]
        s ^= t[2][(left >> 16) & 0xFF] ^ t[3][left >> 24]
        width *= 2
    return int(s[0])


def _as_bytes(data: bytes | bytearray | memoryview | np.ndarray) -> np.ndarray:
    """``data``'s bytes as a flat ``uint8`` array, without a copy."""
    if isinstance(data, np.ndarray):
        return data.reshape(-1).view(np.uint8)
    return np.frombuffer(memoryview(data).cast("B"), np.uint8)


def crc32c(data: bytes | bytearray | memoryview | np.ndarray, crc: int = 0) -> int:
    """The CRC-32C of ``data`` continued from ``crc`` (TensorFlow's ``crc32c::Extend``):
    ``google-crc32c``'s, or where its C extension is missing, :func:`numpy_crc32c`."""
    if _cext is None:  # pragma: no cover - see the import
        return numpy_crc32c(data, crc)
    return int(_cext.extend(crc, _as_bytes(data)))


def numpy_crc32c(data: bytes | bytearray | memoryview | np.ndarray, crc: int = 0) -> int:
    """:func:`crc32c` computed with NumPy alone (the fallback, and the tests' reference)."""
    buf = _as_bytes(data)
    register = crc ^ 0xFFFFFFFF
    for start in range(0, buf.size, _CHUNK):
        chunk = buf[start : start + _CHUNK]
        if chunk.size < _SMALL:
            for b in chunk.tobytes():
                register = _T0_LIST[(register ^ b) & 0xFF] ^ (register >> 8)
            continue
        pad = -chunk.size % _LANE
        padded = np.concatenate([np.zeros(pad, np.uint8), chunk]) if pad else chunk
        register = _shift(register, chunk.size) ^ _lanes(padded)
    return register ^ 0xFFFFFFFF


def raw(data: bytes | bytearray | memoryview | np.ndarray, register: int = 0) -> int:
    """The CRC register after ``data``, from ``register``, with neither the initial value
    nor the final complement: linear in the bytes, so the registers of the parts of a
    message, each moved past the bytes after it (:func:`shift`), XOR to the message's;
    :func:`finish` makes that its CRC-32C.  (Zero bytes from a zero register leave it 0:
    a part's register is that of the message with every byte outside the part zero.)"""
    return crc32c(data, register ^ 0xFFFFFFFF) ^ 0xFFFFFFFF


def shift(register: int, n: int) -> int:
    """The raw register after ``n`` more zero bytes (some microseconds, whatever ``n``)."""
    return _shift(register, n)


def finish(register: int, size: int) -> int:
    """The CRC-32C of a message of ``size`` bytes whose raw register from 0 is
    ``register`` (:func:`raw`)."""
    return _shift(0xFFFFFFFF, size) ^ register ^ 0xFFFFFFFF


def mask(crc: int) -> int:
    """TensorFlow's ``crc32c::Mask``: how a CRC is stored beside the bytes it covers."""
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF
