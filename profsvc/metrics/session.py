"""What a report's session records about how it was made: the version of the ncu that wrote it.

NVIDIA's reader (`ncu_report`) has no accessor for a report's session (its `get_version()` is the reader's own
version, whatever wrote the file), so the session is read from the file. A .ncu-rep is the magic `NVR\\0`, a
header (a little-endian uint32 length, then that many bytes), then blocks: each a uint32 length, a block header
(protobuf) and a payload of the size the block header names. Block headers carry the session's details piece by
piece; among them the versions of the tools that made it, where the provider "Nsight Compute Target" is ncu.
Field numbers are those of Nsight Compute's file format (`extras/FileFormat`: BlockHeader, ReportSessionDetails,
VersionInfo).
"""

from __future__ import annotations

import re
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

MAGIC = b"NVR\x00"
NCU_PROVIDER = b"Nsight Compute Target"
# BlockHeader: SessionDetails, PayloadSize; ReportSessionDetails: VersionInfo; VersionInfo: Provider, Version.
_SESSION_DETAILS, _PAYLOAD_SIZE = 3, 5
_VERSION_INFO = 8
_PROVIDER, _VERSION = 1, 2
# "2025.3.1.0 (build 36398880) (public-release)": the number alone, as `ncu --version` is read (ncu.locate).
_NUMBER = re.compile(rb"\d+(?:\.\d+)+")
_LENGTH = struct.Struct("<I")


class _Malformed(ValueError):
    """Bytes that are not the protobuf they should be."""


def _varint(data: bytes, at: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if at >= len(data) or shift > 63:
            raise _Malformed("varint runs past its message")
        byte = data[at]
        at += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if byte < 0x80:
            return value, at


def _fields(data: bytes) -> Iterator[tuple[int, int | bytes]]:
    """(field number, value) of a protobuf message: varints as int, length-delimited fields as bytes."""
    at = 0
    while at < len(data):
        key, at = _varint(data, at)
        number, wire_type = key >> 3, key & 7
        if wire_type == 0:
            value, at = _varint(data, at)
            yield number, value
        elif wire_type == 2:
            size, at = _varint(data, at)
            if at + size > len(data):
                raise _Malformed("field runs past its message")
            yield number, data[at : at + size]
            at += size
        elif wire_type in (1, 5):
            at += 8 if wire_type == 1 else 4
        else:
            raise _Malformed(f"wire type {wire_type}")


def _chunk(handle: BinaryIO) -> bytes | None:
    """The next length-prefixed piece of the file, None at its end or where it is cut short."""
    prefix = handle.read(_LENGTH.size)
    if len(prefix) < _LENGTH.size:
        return None
    (size,) = _LENGTH.unpack(prefix)
    data = handle.read(size)
    return data if len(data) == size else None


def _ncu_version_in(session: bytes) -> str:
    for number, value in _fields(session):
        if number == _VERSION_INFO and isinstance(value, bytes):
            info = {n: v for n, v in _fields(value) if isinstance(v, bytes)}
            if info.get(_PROVIDER) == NCU_PROVIDER:
                match = _NUMBER.match(info.get(_VERSION, b""))
                return match.group().decode() if match else ""
    return ""


def report_ncu_version(path: str | Path) -> str:
    """The version of the ncu that wrote the report ("2025.3.1.0"); "" where the file does not say."""
    with Path(path).open("rb") as handle:
        if handle.read(len(MAGIC)) != MAGIC or _chunk(handle) is None:
            return ""
        try:
            while (header := _chunk(handle)) is not None:
                payload = 0
                for number, value in _fields(header):
                    if number == _SESSION_DETAILS and isinstance(value, bytes):
                        version = _ncu_version_in(value)
                        if version:
                            return version
                    elif number == _PAYLOAD_SIZE and isinstance(value, int):
                        payload = value
                handle.seek(payload, 1)
        except _Malformed:
            return ""
    return ""
