"""The sidecar index file: ClickHouse granule payloads for the files of a dataset.

Version 2 layout (all integers little-endian; see docs/sidecar.md)::

    offset 0       8 B   magic b"BSKIPIDX"
    offset 8       u16   format version (2)
    offset 10      u16   flags (0)
    offset 12      u32   header length H
    offset 16      H B   header: UTF-8 JSON (index definitions, granule mode, per-file identity,
                         granule rows, and the section table: offset, length and SHA-256 of
                         each (file, index) payload section)
    16 + H         32 B  SHA-256 of bytes [0, 16 + H): the prefix and the header
    48 + H         P B   payload sections, back to back, index-major (all files' index 0, ...)

Each section is the decompressed ClickHouse ``.idx`` stream of one (file, index). A reader
verifies the header once, then reads and verifies only the sections a query needs, when it
needs them (:class:`SectionPayloads`), so a cold query does not hash the whole file.

Version 1 (still read, no longer written) kept one SHA-256 over the whole file in a trailer.

The file is written to a temporary file in the same directory and moved into place with
``os.replace``, so a reader sees the old sidecar or the new one, never a mix.
"""

from __future__ import annotations

import hashlib
import json
import os
import struct
import weakref
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from bloomskip._atomic import atomic_writer
from bloomskip.dataset.listing.files import FileIdentity
from bloomskip.errors import FormatError

MAGIC = b"BSKIPIDX"
FORMAT_VERSION = 2
READABLE_VERSIONS = (1, 2)
PREFIX = struct.Struct("<8sHHI")
TRAILER = struct.Struct("<Q32s")  # version 1 only: payload length and whole-file SHA-256
DIGEST_SIZE = 32
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
        payloads: One ClickHouse ``.idx`` stream per index of the sidecar, in index order.
            Read from a version-2 file: a :class:`SectionPayloads` that reads and verifies a
            section on access; from a version-1 file: read-only views of the file's bytes.
        digests: The SHA-256 of each of ``payloads``, when the builder computed them as it
            produced the payloads (then they are not hashed again when the sidecar is
            written); None otherwise. Not part of equality.
    """

    path: str
    format: str
    identity: FileIdentity
    granule_rows: list[int]
    payloads: Sequence[bytes | memoryview] = field(repr=False)
    digests: Sequence[bytes] | None = field(default=None, repr=False, compare=False)

    def __getstate__(self) -> dict:
        # A payload may be a view (of a builder's buffer, or of a version-1 file's bytes),
        # which pickle refuses: it travels as bytes (a part built on a Dask worker does).
        state = dict(self.__dict__)
        if not isinstance(self.payloads, SectionPayloads):
            state["payloads"] = [
                bytes(payload) if isinstance(payload, memoryview) else payload
                for payload in self.payloads
            ]
        return state


@dataclass
class Sidecar:
    """The whole sidecar: index definitions, granule mode and indexed files.

    Attributes:
        granule: ``"row-group"`` (a row group or an IPC record batch per granule) or a row count.
        indexes: The skip indexes, in order.
        files: Indexed files, keyed by :attr:`FileEntry.path`.
        format_version: The version of the file it was read from (:data:`FORMAT_VERSION` for
            one built in memory); not part of equality.
    """

    granule: str | int
    indexes: list[IndexSpec]
    files: dict[str, FileEntry]
    format_version: int = field(default=FORMAT_VERSION, compare=False)


class _BytesReader:
    """Sections read from bytes already in memory."""

    def __init__(self, data: bytes | memoryview) -> None:
        self._view = memoryview(data)

    def size(self) -> int:
        return len(self._view)

    def read(self, offset: int, length: int) -> bytes | memoryview:
        return self._view[offset : offset + length]


class _FileReader:
    """Sections read with ``pread`` from an open sidecar file.

    The descriptor stays open as long as a payload may still be read: a rebuild replaces the
    sidecar with ``os.replace``, so the open file keeps the bytes the header describes.
    """

    def __init__(self, path: str | os.PathLike) -> None:
        self._fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
        weakref.finalize(self, os.close, self._fd)

    def size(self) -> int:
        return os.fstat(self._fd).st_size

    def read(self, offset: int, length: int) -> bytes:
        chunks = []
        while length > 0:
            chunk = os.pread(self._fd, length, offset)
            if not chunk:
                break  # end of file: the caller sees a short read
            chunks.append(chunk)
            offset += len(chunk)
            length -= len(chunk)
        return b"".join(chunks)


class SectionPayloads(Sequence):
    """The payloads of one file of a version-2 sidecar, read and verified on access.

    ``payloads[i]`` reads section *i* and checks its SHA-256 before returning it, every time
    (nothing unverified is ever returned, and nothing is kept: callers keep what they decode).

    Raises:
        FormatError: On access, when the section is short or its checksum does not match.

    Example:
        >>> entry.payloads[0][:1]  # doctest: +SKIP
        b'\\x03'
    """

    def __init__(self, reader, sections: list[tuple[int, int, bytes]], name: str, source: str):
        self._reader = reader
        self._sections = sections
        self._name = name
        self._source = source

    def __len__(self) -> int:
        return len(self._sections)

    def __getitem__(self, number: int) -> bytes | memoryview:
        if isinstance(number, slice):
            return [self[i] for i in range(*number.indices(len(self)))]
        offset, length, _ = self._sections[number]
        data = self._reader.read(offset, length)
        self.verify(number, data)
        return data

    def digest(self, number: int) -> bytes:
        """The SHA-256 section ``number`` must have (what :meth:`verify` checks against)."""
        return self._sections[number][2]

    def span(self, number: int) -> tuple[object, int, int]:
        """``(reader, absolute offset, length)`` of section ``number`` (nothing is read)."""
        offset, length, _ = self._sections[number]
        return self._reader, offset, length

    def verify(self, number: int, data: bytes | memoryview) -> None:
        """Check that ``data`` is section ``number``'s content (see :meth:`__getitem__`)."""
        offset, length, digest = self._sections[number]
        if len(data) != length or hashlib.sha256(data).digest() != digest:
            raise FormatError(
                f"payload section of index {number % len(self)} of {self._name!r} is corrupt "
                "(checksum mismatch or short read)",
                field=f"{self._name}.payloads[{number % len(self)}]",
                offset=offset,
                source=self._source,
            )

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Sequence) or isinstance(other, (str, bytes)):
            return NotImplemented
        return len(self) == len(other) and all(
            bytes(mine) == bytes(theirs) for mine, theirs in zip(self, other, strict=True)
        )

    __hash__ = None  # type: ignore[assignment]


def join_sections(
    payload_lists: Sequence[Sequence[bytes | memoryview]], number: int
) -> tuple[bytes, list[int], dict[int, FormatError]]:
    """Read payload ``number`` of each list, verify it, and concatenate the good ones.

    When the sections are adjacent in one version-2 file (as :func:`write_sidecar` lays out
    an index's sections), they are read with one ``pread`` and hashed in parallel (hashing
    releases the GIL), and the bytes read are returned as they are, without another copy.

    Args:
        payload_lists: The ``payloads`` of some :class:`FileEntry` objects.
        number: The index whose payloads to read.

    Returns:
        ``(data, good, errors)``: the concatenated payloads that passed their checksums, the
        positions in ``payload_lists`` they came from (in order), and the ``FormatError`` of
        each position whose section is corrupt.

    Example:
        >>> data, good, errors = join_sections([e.payloads for e in entries], 0)  # doctest: +SKIP
    """
    from concurrent.futures import ThreadPoolExecutor

    workers = max(1, min(os.cpu_count() or 1, len(payload_lists)))
    spans = [
        payloads.span(number) if isinstance(payloads, SectionPayloads) else None
        for payloads in payload_lists
    ]
    adjacent = bool(spans) and all(span is not None and span[0] is spans[0][0] for span in spans)
    if adjacent:
        expected = spans[0][1]
        for span in spans:
            adjacent = adjacent and span[1] == expected
            expected += span[2]
    if adjacent:
        reader, start, _ = spans[0]
        data = reader.read(start, sum(span[2] for span in spans))
        view = memoryview(data)
        bounds, position = [], 0
        for span in spans:
            bounds.append((position, position + span[2]))
            position += span[2]

        def check(item: int) -> FormatError | None:
            first, last = bounds[item]
            try:
                payload_lists[item].verify(number, view[first:last])
            except FormatError as exc:
                return exc
            return None

        with ThreadPoolExecutor(max_workers=workers) as pool:
            problems = list(pool.map(check, range(len(spans))))
        if not any(problems):
            return bytes(data), list(range(len(spans))), {}
        # Some section is corrupt: keep the others (below) and report it.

    def fetch(item: int) -> bytes | memoryview | FormatError:
        try:
            return payload_lists[item][number]  # verified as it is read
        except FormatError as exc:
            return exc

    with ThreadPoolExecutor(max_workers=workers) as pool:
        fetched = list(pool.map(fetch, range(len(payload_lists))))
    errors = {item: got for item, got in enumerate(fetched) if isinstance(got, FormatError)}
    good = [item for item in range(len(fetched)) if item not in errors]
    return b"".join(fetched[item] for item in good), good, errors


@dataclass(frozen=True)
class EncodedSidecar:
    """A sidecar in bytes, with where its parts lie (what a segment's manifest entry records).

    Attributes:
        data: The whole file, format version 2.
        header_end: Bytes from the start to the end of the header checksum: everything a reader
            needs before it can read a section.
        index_spans: ``(offset, length)`` of each index's sections, in index order; each index's
            sections are adjacent (the payload is index-major).
    """

    data: bytes
    header_end: int
    index_spans: tuple[tuple[int, int], ...]


def encode_sidecar(sidecar: Sidecar) -> EncodedSidecar:
    """Encode ``sidecar`` in format version 2 (see :func:`write_sidecar`).

    Raises:
        FormatError: A payload of ``sidecar`` (read from a corrupt sidecar) fails its checksum.

    Example:
        >>> encoded = encode_sidecar(Sidecar("row-group", [], {}))
        >>> encoded.data[:8], encoded.header_end == len(encoded.data), encoded.index_spans
        (b'BSKIPIDX', True, ())
    """
    pieces, header_end, spans = _encode_pieces(sidecar)
    return EncodedSidecar(b"".join(pieces), header_end, spans)


def _encode_pieces(
    sidecar: Sidecar,
) -> tuple[list[bytes | memoryview], int, tuple[tuple[int, int], ...]]:
    """The version-2 file as the pieces it is made of, in order (prefix, header, header
    checksum, then each payload section), with the header's end and the index spans of
    :class:`EncodedSidecar`."""
    header, payloads = _encode_header(sidecar)
    prefix = PREFIX.pack(MAGIC, FORMAT_VERSION, 0, len(header))
    header_end = len(prefix) + len(header) + DIGEST_SIZE
    spans = []
    offset = header_end
    files = len(sidecar.files)
    for number in range(len(sidecar.indexes)):
        length = sum(len(payload) for payload in payloads[number * files : (number + 1) * files])
        spans.append((offset, length))
        offset += length
    digest = hashlib.sha256(prefix + header).digest()
    return [prefix, header, digest, *payloads], header_end, tuple(spans)


def write_sidecar(sidecar: Sidecar, path: str | os.PathLike) -> None:
    """Write ``sidecar`` to ``path`` atomically, in format version 2.

    The pieces of the file are written one after the other, never joined into one buffer
    (the payloads are most of the file).

    Args:
        sidecar: What to write.
        path: Destination file.

    Raises:
        OSError: The directory is not writable.
        FormatError: A payload of ``sidecar`` (read from a corrupt sidecar) fails its checksum.

    Example:
        >>> write_sidecar(Sidecar("row-group", [], {}), "data/_bloomskip.index")  # doctest: +SKIP
    """
    pieces, _, _ = _encode_pieces(sidecar)
    with atomic_writer(Path(path)) as handle:
        handle.writelines(pieces)


def read_sidecar(path: str | os.PathLike) -> Sidecar:
    """Read a sidecar file and verify its header (version 2) or all of it (version 1).

    A version-2 sidecar's payloads are :class:`SectionPayloads`: each section is read and
    verified when it is accessed.

    Args:
        path: The sidecar file.

    Returns:
        The decoded sidecar.

    Raises:
        FormatError: Bad magic, unknown version, checksum mismatch, or a header that does not
            describe the payload sections (the message names the field and offset).
        OSError: The file cannot be read.

    Example:
        >>> read_sidecar("data/_bloomskip.index").granule  # doctest: +SKIP
        'row-group'
    """
    source = str(path)
    reader = _FileReader(path)
    version = _check_prefix(reader.read(0, PREFIX.size), reader.size(), source)
    if version == 1:
        return _decode_v1(reader.read(0, reader.size()), source)
    return _decode_v2(reader, source)


def decode_sidecar(data: bytes, source: str = "<sidecar>") -> Sidecar:
    """Decode sidecar bytes (see :func:`read_sidecar`); version-2 sections verify on access."""
    version = _check_prefix(data[: PREFIX.size], len(data), source)
    if version == 1:
        return _decode_v1(data, source)
    return _decode_v2(_BytesReader(data), source)


def _check_prefix(prefix: bytes, size: int, source: str) -> int:
    if len(prefix) < PREFIX.size:
        raise FormatError(f"{size} bytes is too short", field="magic", offset=0, source=source)
    magic, version, flags, _ = PREFIX.unpack_from(prefix, 0)
    if magic != MAGIC:
        raise FormatError(f"bad magic {magic!r}", field="magic", offset=0, source=source)
    if version not in READABLE_VERSIONS:
        raise FormatError(
            f"unsupported format version {version}", field="version", offset=8, source=source
        )
    if flags != 0:
        raise FormatError(f"unknown flags {flags:#x}", field="flags", offset=10, source=source)
    return version


#: Every integer of the header is a size, offset, row count or timestamp: a signed 64-bit value.
_MAX_INT_DIGITS = len(str(-(2**63)))
_INT_LIMIT = 2**63


def _bounded_int(text: str) -> int:
    """``parse_int`` of the header: refuse digits no 64-bit count needs before converting them.

    Without it, ``json.loads`` converts any integer literal, and one of more than 4,300 digits
    raises a plain ``ValueError`` (Python's integer-string conversion limit).
    """
    if len(text) > _MAX_INT_DIGITS:
        raise ValueError(f"an integer of {len(text)} digits, more than a 64-bit count has")
    return int(text)


def _parse_json(text: bytes | memoryview, source: str) -> object:
    try:
        return json.loads(bytes(text).decode("utf-8"), parse_int=_bounded_int)
    except (ValueError, RecursionError) as exc:
        # ValueError covers UnicodeDecodeError, JSONDecodeError and _bounded_int's refusal.
        raise FormatError(
            f"header is not UTF-8 JSON of 64-bit integers: {exc}",
            field="header",
            offset=PREFIX.size,
            source=source,
        ) from exc


def decode_sidecar_from(reader, source: str) -> Sidecar:
    """Decode a version-2 sidecar read through ``reader`` (``size()`` and ``read(offset, n)``).

    Only the prefix and header are read now; each section when it is first accessed. A segment
    of a manifest-based index is read this way, from byte ranges fetched from its store.

    Raises:
        FormatError: As :func:`read_sidecar`; version 1 is not accepted here.
    """
    version = _check_prefix(reader.read(0, PREFIX.size), reader.size(), source)
    if version != FORMAT_VERSION:
        raise FormatError(
            f"a segment must be format version {FORMAT_VERSION}, not {version}",
            field="version",
            offset=8,
            source=source,
        )
    return _decode_v2(reader, source)


def _decode_v2(reader, source: str) -> Sidecar:
    size = reader.size()
    _, _, _, header_length = PREFIX.unpack_from(reader.read(0, PREFIX.size), 0)
    header_end = PREFIX.size + header_length
    payload_start = header_end + DIGEST_SIZE
    if payload_start > size:
        raise FormatError(
            f"header length {header_length} runs past the end of the file ({size} bytes)",
            field="header_length",
            offset=12,
            source=source,
        )
    prefix_and_header = reader.read(0, header_end)
    expected = reader.read(header_end, DIGEST_SIZE)
    if len(expected) != DIGEST_SIZE or hashlib.sha256(prefix_and_header).digest() != expected:
        raise FormatError(
            "header checksum mismatch: the sidecar is corrupt",
            field="header_sha256",
            offset=header_end,
            source=source,
        )
    header = _parse_json(memoryview(prefix_and_header)[PREFIX.size :], source)
    _require(isinstance(header, dict), "header is not a JSON object", "header", source)
    payload_length = header.get("payload_length")
    _require(_is_count(payload_length), "payload_length is not a count", "payload_length", source)
    if payload_start + payload_length != size:
        raise FormatError(
            f"header length {header_length} and payload length {payload_length} do not add up "
            f"to the file size {size}",
            field="payload_length",
            offset=PREFIX.size,
            source=source,
        )
    return _decode_header(header, source, _SectionTable(reader, payload_start, payload_length))


def _decode_v1(data: bytes | memoryview, source: str) -> Sidecar:
    if len(data) < PREFIX.size + TRAILER.size:
        raise FormatError(f"{len(data)} bytes is too short", field="magic", offset=0, source=source)
    _, _, _, header_length = PREFIX.unpack_from(data, 0)
    body_end = len(data) - DIGEST_SIZE
    expected = bytes(data[body_end:])
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
    header = _parse_json(memoryview(data)[PREFIX.size : payload_start], source)
    section = memoryview(data)[payload_start : body_end - 8]
    sidecar = _decode_header(header, source, _ViewTable(section))
    sidecar.format_version = 1
    return sidecar


class _ViewTable:
    """Version 1: ``[offset, length]`` entries become views of the verified payload section."""

    def __init__(self, section: memoryview) -> None:
        self._section = section

    def payloads(self, blobs: list, name: str, source: str) -> list[memoryview]:
        payloads = []
        for blob in blobs:
            ok = isinstance(blob, list) and len(blob) == 2 and all(_is_count(v) for v in blob)
            _require(ok, f"{name}.payloads entry {blob!r} is not [offset, length]", name, source)
            start, length = blob
            _require(
                start + length <= len(self._section),
                f"{name}.payloads entry {blob!r} runs past the payload section "
                f"({len(self._section)} bytes)",
                name,
                source,
            )
            # A view, not a copy: the payloads are most of the file.
            payloads.append(self._section[start : start + length])
        return payloads

    def finish(self, source: str) -> None:
        """Version 1 needs no final check: its checksum covered everything."""


class _SectionTable:
    """Version 2: ``[offset, length, sha256]`` entries that tile the payload area.

    Requiring the sections to tile the area exactly (no gap, no overlap, nothing after the
    last) means every payload byte belongs to one section, so a flipped byte anywhere fails
    that section's checksum when it is read.
    """

    def __init__(self, reader, payload_start: int, payload_length: int) -> None:
        self._reader = reader
        self._start = payload_start
        self._length = payload_length
        self._spans: list[tuple[int, int]] = []

    def payloads(self, blobs: list, name: str, source: str) -> SectionPayloads:
        sections = []
        for blob in blobs:
            ok = (
                isinstance(blob, list)
                and len(blob) == 3
                and _is_count(blob[0])
                and _is_count(blob[1])
                and isinstance(blob[2], str)
                and len(blob[2]) == 2 * DIGEST_SIZE
                and _is_hex(blob[2])
            )
            _require(
                ok, f"{name}.payloads entry {blob!r} is not [offset, length, sha256]", name, source
            )
            start, length, digest = blob
            _require(
                start + length <= self._length,
                f"{name}.payloads entry {blob!r} runs past the payload sections "
                f"({self._length} bytes)",
                name,
                source,
            )
            self._spans.append((start, length))
            sections.append((self._start + start, length, bytes.fromhex(digest)))
        return SectionPayloads(self._reader, sections, name, source)

    def finish(self, source: str) -> None:
        end = 0
        for start, length in sorted(self._spans):
            _require(
                start == end,
                f"the payload sections leave a gap or overlap at offset {min(start, end)}",
                "payloads",
                source,
            )
            end = start + length
        _require(
            end == self._length,
            f"the sections cover {end} of the {self._length} payload bytes",
            "payload_length",
            source,
        )


def _encode_header(sidecar: Sidecar) -> tuple[bytes, list[bytes | memoryview]]:
    entries = list(sidecar.files.values())
    for entry in entries:
        if len(entry.payloads) != len(sidecar.indexes):
            raise ValueError(
                f"{entry.path}: {len(entry.payloads)} payloads for {len(sidecar.indexes)} indexes"
            )
    # Index-major: the sections of one index are adjacent, so a query reads each index it
    # uses with one read, already in the order SkipIndex.from_bytes wants them.
    payloads: list[bytes | memoryview] = []
    tables: list[list] = [[] for _ in entries]
    offset = 0
    for number in range(len(sidecar.indexes)):
        for entry, table in zip(entries, tables, strict=True):
            payload = entry.payloads[number]  # a SectionPayloads verifies it as it is read
            table.append([offset, len(payload), _payload_digest(entry, number, payload)])
            payloads.append(payload)
            offset += len(payload)
    files = [
        {
            "path": entry.path,
            "format": entry.format,
            "size": entry.identity.size,
            "mtime_ns": entry.identity.mtime_ns,
            "footer_sha256": entry.identity.footer_sha256,
            "granule_rows": [int(rows) for rows in entry.granule_rows],
            "payloads": table,
        }
        for entry, table in zip(entries, tables, strict=True)
    ]
    header = {
        "granule": sidecar.granule,
        "indexes": [
            {"definition": spec.definition, "column_types": dict(spec.column_types)}
            for spec in sidecar.indexes
        ],
        "payload_length": offset,
        "files": files,
    }
    return json.dumps(header, separators=(",", ":")).encode("utf-8"), payloads


def _payload_digest(entry: FileEntry, number: int, payload: bytes | memoryview) -> str:
    """The hex SHA-256 of ``entry``'s payload ``number``: the one its builder computed, or the
    one a section read from a sidecar was just verified against, else hashed now."""
    if entry.digests is not None and len(entry.digests) == len(entry.payloads):
        return entry.digests[number].hex()
    if isinstance(entry.payloads, SectionPayloads):
        return entry.payloads.digest(number).hex()
    return hashlib.sha256(payload).hexdigest()


def _require(condition: bool, message: str, field_name: str, source: str) -> None:
    if not condition:
        raise FormatError(message, field=field_name, offset=PREFIX.size, source=source)


def _is_count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value < _INT_LIMIT


def _decode_header(header: object, source: str, table) -> Sidecar:
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
        payloads = table.payloads(blobs, name, source)
        identity = FileIdentity(item["size"], item["mtime_ns"], digest)
        files[path] = FileEntry(path, item["format"], identity, list(rows), payloads)
    table.finish(source)
    return Sidecar(granule, indexes, files)


def _is_hex(text: str) -> bool:
    try:
        bytes.fromhex(text)
    except ValueError:
        return False
    return True
