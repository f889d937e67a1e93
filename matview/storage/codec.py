"""msgpack encoding of rows, keys and operator state (never pickle).

SQLite values map onto msgpack one to one: NULL→nil, INTEGER→int, REAL→float64,
TEXT→str, BLOB→bin, so an encoded row keeps every value's storage class (`3` and
`3.0` encode differently). Python ints beyond 64 bits, which only exact sums hold,
travel as an extension type.
"""

from __future__ import annotations

from typing import Any

import msgpack

_BIG_INT = 1


def _encode_extra(value: object) -> msgpack.ExtType:
    if isinstance(value, int):
        length = (value.bit_length() + 8) // 8
        return msgpack.ExtType(_BIG_INT, value.to_bytes(length, "little", signed=True))
    raise TypeError(f"cannot encode {type(value).__name__} in matview state")


def _decode_extra(code: int, data: bytes) -> object:
    if code == _BIG_INT:
        return int.from_bytes(data, "little", signed=True)
    return msgpack.ExtType(code, data)


_packer = msgpack.Packer(use_bin_type=True, default=_encode_extra, autoreset=True)


def pack(value: Any) -> bytes:
    """Encode a row, key or state value."""
    try:
        return _packer.pack(value)
    except (OverflowError, TypeError):
        # Packer can be left holding a partial buffer after an error; use a fresh one.
        return msgpack.packb(value, use_bin_type=True, default=_encode_extra)


def unpack(data: bytes) -> Any:
    """Decode what `pack` wrote; arrays come back as lists."""
    return msgpack.unpackb(data, raw=False, ext_hook=_decode_extra, strict_map_key=False)
