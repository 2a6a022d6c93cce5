"""The sidecar index file: ClickHouse granule payloads for the files of a dataset.

Layout (all integers little-endian; see docs/sidecar.md)::

    offset 0   8 B   magic b"BSKIPIDX"
    offset 8   u16   format version (1)
    offset 10  u16   flags (0)
    offset 12  u32   header length H
    offset 16  H B   header: UTF-8 JSON (index definitions, granule mode, per-file identity,
                     granule rows and the offset/length of each index payload)
    16 + H     ...   payloads: the decompressed ClickHouse ``.idx`` stream of each (file, index)
    end - 40   u64   payload section length
    end - 32   32 B  SHA-256 of every byte before it

The file is written to a temporary file in the same directory and moved into place with
``os.replace``, so a reader sees the old sidecar or the new one, never a mix.
"""

from __future__ import annotations

import hashlib
import json
import os
import struct
from dataclasses import dataclass, field
from pathlib import Path

from bloomskip._atomic import atomic_writer
from bloomskip.dataset.sources import FileIdentity
from bloomskip.errors import FormatError

MAGIC = b"BSKIPIDX"
FORMAT_VERSION = 1
PREFIX = struct.Struct("<8sHHI")
TRAILER = struct.Struct("<Q32s")
FILE_FORMATS = ("parquet", "arrow-ipc")


@dataclass(frozen=True)
class IndexSpec:
    """One skip index stored in the sidecar.

    Attributes:
        definition: The ClickHouse index definition text (``INDEX name expr TYPE ...``).
        column_types: ``(column, ClickHouse type)`` of each source column the index reads: the
            type its values were hashed as.
    """

    definition: str
    column_types: tuple[tuple[str, str], ...]


@dataclass
class FileEntry:
    """One indexed source file.

    Attributes:
        path: The file's path relative to the sidecar's directory, with ``/`` separators.
        format: ``"parquet"`` or ``"arrow-ipc"``.
        identity: Size, modification time and footer hash at indexing time.
        granule_rows: Rows of each granule, in file order.
        payloads: One ClickHouse ``.idx`` stream per index of the sidecar, in index order
            (read from a file: read-only views of the sidecar's bytes).
    """

    path: str
    format: str
    identity: FileIdentity
    granule_rows: list[int]
    payloads: list[bytes | memoryview] = field(repr=False)


@dataclass
class Sidecar:
    """The whole sidecar: index definitions, granule mode and indexed files.

    Attributes:
        granule: ``"row-group"`` (a row group or an IPC record batch per granule) or a row count.
        indexes: The skip indexes, in order.
        files: Indexed files, keyed by :attr:`FileEntry.path`.
    """

    granule: str | int
    indexes: list[IndexSpec]
    files: dict[str, FileEntry]


def write_sidecar(sidecar: Sidecar, path: str | os.PathLike) -> None:
    """Write ``sidecar`` to ``path`` atomically.

    Args:
        sidecar: What to write.
        path: Destination file.

    Raises:
        OSError: The directory is not writable.

    Example:
        >>> write_sidecar(Sidecar("row-group", [], {}), "data/_bloomskip.index")  # doctest: +SKIP
    """
    destination = Path(path)
    header, payloads = _encode_header(sidecar)
    with atomic_writer(destination) as handle:
        digest = hashlib.sha256()

        def emit(chunk: bytes) -> None:
            digest.update(chunk)
            handle.write(chunk)

        emit(PREFIX.pack(MAGIC, FORMAT_VERSION, 0, len(header)))
        emit(header)
        payload_length = 0
        for payload in payloads:
            emit(payload)
            payload_length += len(payload)
        emit(struct.pack("<Q", payload_length))
        handle.write(digest.digest())


def read_sidecar(path: str | os.PathLike) -> Sidecar:
    """Read and verify a sidecar file.

    Args:
        path: The sidecar file.

    Returns:
        The decoded sidecar; payloads are read-only views of the file's bytes.

    Raises:
        FormatError: Bad magic, unknown version, checksum mismatch, or a header that does not
            describe the payload section (the message names the field and offset).
        OSError: The file cannot be read.

    Example:
        >>> read_sidecar("data/_bloomskip.index").granule  # doctest: +SKIP
        'row-group'
    """
    source = str(path)
    data = Path(path).read_bytes()
    return decode_sidecar(data, source)


def decode_sidecar(data: bytes, source: str = "<sidecar>") -> Sidecar:
    """Decode sidecar bytes (see :func:`read_sidecar`)."""
    if len(data) < PREFIX.size + TRAILER.size:
        raise FormatError(f"{len(data)} bytes is too short", field="magic", offset=0, source=source)
    magic, version, flags, header_length = PREFIX.unpack_from(data, 0)
    if magic != MAGIC:
        raise FormatError(f"bad magic {magic!r}", field="magic", offset=0, source=source)
    if version != FORMAT_VERSION:
        raise FormatError(
            f"unsupported format version {version}", field="version", offset=8, source=source
        )
    if flags != 0:
        raise FormatError(f"unknown flags {flags:#x}", field="flags", offset=10, source=source)
    body_end = len(data) - 32
    expected = data[body_end:]
    if hashlib.sha256(memoryview(data)[:body_end]).digest() != expected:
        raise FormatError(
            "checksum mismatch: the sidecar is corrupt",
            field="sha256",
            offset=body_end,
            source=source,
        )
    payload_start = PREFIX.size + header_length
    (payload_length,) = struct.unpack_from("<Q", data, body_end - 8)
    if payload_start + payload_length != body_end - 8:
        raise FormatError(
            f"header length {header_length} and payload length {payload_length} do not add up "
            f"to the file size {len(data)}",
            field="header_length",
            offset=12,
            source=source,
        )
    try:
        header = json.loads(data[PREFIX.size : payload_start].decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
        raise FormatError(
            f"header is not UTF-8 JSON: {exc}", field="header", offset=PREFIX.size, source=source
        ) from exc
    return _decode_header(header, memoryview(data)[payload_start : body_end - 8], source)


def _encode_header(sidecar: Sidecar) -> tuple[bytes, list[bytes]]:
    payloads: list[bytes] = []
    offset = 0
    files = []
    for entry in sidecar.files.values():
        if len(entry.payloads) != len(sidecar.indexes):
            raise ValueError(
                f"{entry.path}: {len(entry.payloads)} payloads for {len(sidecar.indexes)} indexes"
            )
        blobs = []
        for payload in entry.payloads:
            blobs.append([offset, len(payload)])
            payloads.append(payload)
            offset += len(payload)
        files.append(
            {
                "path": entry.path,
                "format": entry.format,
                "size": entry.identity.size,
                "mtime_ns": entry.identity.mtime_ns,
                "footer_sha256": entry.identity.footer_sha256,
                "granule_rows": [int(rows) for rows in entry.granule_rows],
                "payloads": blobs,
            }
        )
    header = {
        "granule": sidecar.granule,
        "indexes": [
            {"definition": spec.definition, "column_types": dict(spec.column_types)}
            for spec in sidecar.indexes
        ],
        "files": files,
    }
    return json.dumps(header, separators=(",", ":")).encode("utf-8"), payloads


def _require(condition: bool, message: str, field_name: str, source: str) -> None:
    if not condition:
        raise FormatError(message, field=field_name, offset=PREFIX.size, source=source)


def _is_count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _decode_header(header: object, payload_section: memoryview, source: str) -> Sidecar:
    _require(isinstance(header, dict), "header is not a JSON object", "header", source)
    granule = header.get("granule")
    _require(
        granule == "row-group" or (_is_count(granule) and granule > 0),
        f"granule must be 'row-group' or a positive row count, not {granule!r}",
        "granule",
        source,
    )
    raw_indexes = header.get("indexes")
    _require(isinstance(raw_indexes, list), "indexes must be a list", "indexes", source)
    indexes = []
    for number, item in enumerate(raw_indexes):
        name = f"indexes[{number}]"
        _require(isinstance(item, dict), f"{name} is not an object", name, source)
        definition, column_types = item.get("definition"), item.get("column_types")
        _require(isinstance(definition, str), f"{name}.definition is not text", name, source)
        _require(
            isinstance(column_types, dict)
            and all(isinstance(t, str) for t in column_types.values()),
            f"{name}.column_types is not an object of column: type name",
            name,
            source,
        )
        indexes.append(IndexSpec(definition, tuple(column_types.items())))
    raw_files = header.get("files")
    _require(isinstance(raw_files, list), "files must be a list", "files", source)
    files: dict[str, FileEntry] = {}
    for number, item in enumerate(raw_files):
        name = f"files[{number}]"
        _require(isinstance(item, dict), f"{name} is not an object", name, source)
        path = item.get("path")
        _require(isinstance(path, str) and path != "", f"{name}.path is not text", name, source)
        _require(path not in files, f"{name}.path {path!r} appears twice", name, source)
        _require(item.get("format") in FILE_FORMATS, f"{name}.format is unknown", name, source)
        for key in ("size", "mtime_ns"):
            _require(_is_count(item.get(key)), f"{name}.{key} is not a count", name, source)
        digest = item.get("footer_sha256")
        _require(
            isinstance(digest, str) and len(digest) == 64 and _is_hex(digest),
            f"{name}.footer_sha256 is not a SHA-256 hex digest",
            name,
            source,
        )
        rows = item.get("granule_rows")
        _require(
            isinstance(rows, list) and all(_is_count(r) for r in rows),
            f"{name}.granule_rows is not a list of counts",
            name,
            source,
        )
        blobs = item.get("payloads")
        _require(
            isinstance(blobs, list) and len(blobs) == len(indexes),
            f"{name}.payloads must hold one entry per index ({len(indexes)})",
            name,
            source,
        )
        payloads = []
        for blob in blobs:
            ok = isinstance(blob, list) and len(blob) == 2 and all(_is_count(v) for v in blob)
            _require(ok, f"{name}.payloads entry {blob!r} is not [offset, length]", name, source)
            start, length = blob
            _require(
                start + length <= len(payload_section),
                f"{name}.payloads entry {blob!r} runs past the payload section "
                f"({len(payload_section)} bytes)",
                name,
                source,
            )
            # A view, not a copy: the payloads are most of the file.
            payloads.append(payload_section[start : start + length])
        identity = FileIdentity(item["size"], item["mtime_ns"], digest)
        files[path] = FileEntry(path, item["format"], identity, list(rows), payloads)
    return Sidecar(granule, indexes, files)


def _is_hex(text: str) -> bool:
    try:
        bytes.fromhex(text)
    except ValueError:
        return False
    return True
