"""ClickHouse marks files (``.mrk``, ``.mrk2``, ``.mrk4``, compressed ``.cmrk*``) and the
``skp_idx.packed`` archive.

A mark says where a granule starts: the offset of its compressed block in the data file and the
offset inside that block's decompressed bytes. Records, all u64 little-endian:

=========  ===================================================================================
``.mrk``   (block offset, offset in block)                  fixed granularity: no row count
``.mrk2``  (block offset, offset in block, rows)            Wide part, adaptive granularity
``.mrk4``  S x (block offset, offset in block), then rows   Compact part (S substreams; skip-index
                                                            marks have S = 1)
``.cmrk*`` the same records inside a compressed stream (see :mod:`.compression`), ZSTD(3) by default
=========  ===================================================================================

Skip-index marks hold one record per *index* granule and no final mark; their rows field is 1.
Data marks (column marks, ``data.mrk4``) hold one per data granule plus, with adaptive granularity,
a final mark of 0 rows.

``skp_idx.packed`` (ClickHouse 26.x) bundles every small skip-index file: ``u8 version``, ``u64``
member count, then per member ``VarUInt name length``, name, ``u64 offset``, ``u64 size`` and, from
version 1, ``u64 uncompressed size``; then the members' bytes, identical to the standalone files.

API::

    MarksFormat.from_name("skp_idx_i.cmrk2")   # -> MarksFormat(kind=".mrk2", compressed=True)
    read_marks(data, fmt, source="", substreams=1, max_records=None) -> Marks
        # .block_offset / .offset_in_block (N, S) uint64, .rows (N,) or None
    write_marks(block_offsets, offsets_in_block, fmt, rows=None, codec="ZSTD(3)") -> bytes
    PackedArchive.parse(data, source="")       # .members {name: PackedMember}, .read(name)
    write_skip_index_files(directory, name, granules, codec="LZ4", marks_extension=".mrk2")
        # -> (idx path, marks path), both written atomically, named as ClickHouse names them
    escape_for_file_name("a-b")                # -> "a%2Db"

Example:
    >>> fmt = MarksFormat.from_name("skp_idx_i.mrk2")
    >>> data = write_marks([0, 0], [0, 38], fmt)
    >>> read_marks(data, fmt).offset_in_block[:, 0].tolist()
    [0, 38]
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from bloomskip._atomic import write_atomically
from bloomskip.clickhouse import compression
from bloomskip.errors import FormatError

MARKS_KINDS = (".mrk", ".mrk2", ".mrk3", ".mrk4")
#: Default ``marks_compression_codec`` of MergeTree.
DEFAULT_MARKS_CODEC = "ZSTD(3)"
#: Default ``marks_compress_block_size`` of MergeTree.
DEFAULT_MARKS_BLOCK_SIZE = 65536

_U64 = struct.Struct("<Q")


@dataclass(frozen=True)
class MarksFormat:
    """The layout of a marks file, as its extension tells it.

    Attributes:
        kind: ``".mrk"`` (fixed granularity), ``".mrk2"`` (Wide, adaptive), ``".mrk3"`` (Compact
            before 26.x, one pair per column) or ``".mrk4"`` (Compact, one pair per substream).
        compressed: True for the ``.cmrk*`` forms.
    """

    kind: str
    compressed: bool = False

    @classmethod
    def from_name(cls, name: str | os.PathLike[str]) -> MarksFormat:
        """Read the format from a file name or extension.

        Args:
            name: ``"x.mrk2"``, ``".cmrk4"``, a path...

        Returns:
            The format.

        Raises:
            ValueError: not a marks extension.

        Example:
            >>> MarksFormat.from_name("skp_idx_a.cmrk")
            MarksFormat(kind='.mrk', compressed=True)
        """
        text = os.fspath(name)
        extension = text[text.rfind(".") :] if "." in text else ""
        compressed = extension.startswith(".cmrk")
        kind = ".mrk" + extension[len(".cmrk") :] if compressed else extension
        if kind not in MARKS_KINDS:
            raise ValueError(f"not a marks file extension: {text!r}")
        return cls(kind, compressed)

    @property
    def extension(self) -> str:
        """The file extension, e.g. ``".cmrk2"``."""
        return (".c" + self.kind[1:]) if self.compressed else self.kind

    @property
    def has_rows(self) -> bool:
        """Whether each record ends with a row count (every kind but ``.mrk``)."""
        return self.kind != ".mrk"

    def record_size(self, substreams: int = 1) -> int:
        """Bytes per record for ``substreams`` (offset pairs per record; 1 for skip indexes)."""
        return 16 * substreams + (8 if self.has_rows else 0)


@dataclass(frozen=True)
class Marks:
    """Decoded marks.

    Attributes:
        block_offset: uint64 (N, S): file offset of the compressed block, per substream.
        offset_in_block: uint64 (N, S): offset inside the decompressed block, per substream.
        rows: uint64 (N,): rows of each granule, or None for ``.mrk`` (fixed granularity).
    """

    block_offset: np.ndarray
    offset_in_block: np.ndarray
    rows: np.ndarray | None

    def __len__(self) -> int:
        return len(self.block_offset)


def read_marks(
    data: bytes | bytearray | memoryview,
    fmt: MarksFormat,
    source: str = "",
    substreams: int = 1,
    max_records: int | None = None,
) -> Marks:
    """Decode a marks file.

    Args:
        data: The file's bytes (compressed ones for ``.cmrk*``).
        fmt: Its format, e.g. ``MarksFormat.from_name(path)``.
        source: File name used in error messages.
        substreams: Offset pairs per record: 1 for skip-index marks and Wide column marks, the
            number of substreams (``.mrk4``) or columns (``.mrk3``) for Compact data marks.
        max_records: The most records the caller can expect; compressed marks are decoded under
            ``max_records * record size`` bytes (see :func:`compression.iter_blocks`), so a
            compression bomb is refused before it is decoded. None: the default stream bound.

    Returns:
        The marks.

    Raises:
        FormatError: a corrupt compressed stream (or compressed marks decoding to more than
            ``max_records`` records), or a size that is not a whole number of records.

    Example:
        >>> read_marks(bytes(16), MarksFormat(".mrk")).rows is None
        True
    """
    if substreams < 1:
        raise ValueError(f"substreams must be >= 1, got {substreams}")
    record = fmt.record_size(substreams)
    limit = None if max_records is None else max_records * record
    raw = compression.read_compressed_stream(data, source, limit=limit) if fmt.compressed else data
    if len(raw) % record:
        raise FormatError(
            f"{len(raw)} bytes of {fmt.extension} marks is not a whole number of {record}-byte "
            f"records",
            field="marks",
            offset=len(raw) - len(raw) % record,
            source=source,
        )
    words = np.frombuffer(raw, dtype="<u8").reshape(-1, record // 8).astype(np.uint64)
    pairs = words[:, : 2 * substreams].reshape(len(words), substreams, 2)
    rows = words[:, -1].copy() if fmt.has_rows else None
    return Marks(pairs[:, :, 0].copy(), pairs[:, :, 1].copy(), rows)


def write_marks(
    block_offsets: Sequence[int] | np.ndarray,
    offsets_in_block: Sequence[int] | np.ndarray,
    fmt: MarksFormat,
    rows: Sequence[int] | np.ndarray | None = None,
    *,
    codec: str = DEFAULT_MARKS_CODEC,
) -> bytes:
    """Encode skip-index marks (one offset pair per record).

    Args:
        block_offsets: Per granule, the offset of its compressed block in the data file.
        offsets_in_block: Per granule, the offset inside that block's decompressed bytes.
        fmt: The marks format to write.
        rows: The rows field of ``.mrk2``/``.mrk4``; skip indexes store 1 (the default).
        codec: Codec of the compressed forms (ClickHouse's ``marks_compression_codec``).

    Returns:
        The file's bytes.

    Raises:
        ValueError: arrays of different lengths, or rows given for ``.mrk``.

    Example:
        >>> write_marks([0], [5], MarksFormat(".mrk")).hex()
        '00000000000000000500000000000000'
    """
    blocks = np.asarray(block_offsets, dtype=np.uint64).reshape(-1)
    inside = np.asarray(offsets_in_block, dtype=np.uint64).reshape(-1)
    if len(blocks) != len(inside):
        raise ValueError(f"{len(blocks)} block offsets but {len(inside)} offsets in block")
    columns = [blocks, inside]
    if fmt.has_rows:
        row_counts = np.ones(len(blocks), np.uint64) if rows is None else rows
        row_counts = np.asarray(row_counts, dtype=np.uint64).reshape(-1)
        if len(row_counts) != len(blocks):
            raise ValueError(f"{len(blocks)} marks but {len(row_counts)} row counts")
        columns.append(row_counts)
    elif rows is not None:
        raise ValueError(".mrk marks have no rows field")
    raw = np.stack(columns, axis=1).astype("<u8").tobytes()
    if not fmt.compressed or not raw:
        return raw
    # Marks are compressed in fixed-size buffers regardless of record boundaries.
    view = memoryview(raw)
    return b"".join(
        compression.compress_block(view[start : start + DEFAULT_MARKS_BLOCK_SIZE], codec)
        for start in range(0, len(raw), DEFAULT_MARKS_BLOCK_SIZE)
    )


@dataclass(frozen=True)
class PackedMember:
    """One file inside ``skp_idx.packed``.

    Attributes:
        name: The file name, e.g. ``"skp_idx_i1.idx"``.
        offset: Where its bytes start in the archive.
        size: Its size in the archive (the size of the standalone file).
        uncompressed_size: Its decompressed size (0 for marks members, and before version 1).
    """

    name: str
    offset: int
    size: int
    uncompressed_size: int


@dataclass(frozen=True)
class PackedArchive:
    """A parsed ``skp_idx.packed`` archive.

    Attributes:
        version: The format version byte (0 or 1).
        members: Members by name, in archive order.
        data: The archive's bytes.
        source: File name used in error messages.
    """

    version: int
    members: dict[str, PackedMember]
    data: bytes | memoryview
    source: str = ""

    @classmethod
    def parse(cls, data: bytes | bytearray | memoryview, source: str = "") -> PackedArchive:
        """Parse the archive header and check every member lies inside the file.

        Args:
            data: The archive's bytes.
            source: File name used in error messages.

        Returns:
            The archive.

        Raises:
            FormatError: unknown version, truncated header, a member out of bounds or listed
                twice, an implausible count or name length.

        Example:
            >>> PackedArchive.parse(bytes([1]) + bytes(8)).members
            {}
        """
        view = memoryview(data).cast("B")
        total = len(view)
        if total < 9:
            raise FormatError(
                f"archive of {total} bytes is shorter than its 9-byte header",
                field="header",
                offset=0,
                source=source,
            )
        version = view[0]
        if version > 1:
            raise FormatError(
                f"unknown skp_idx.packed version {version} (known: 0, 1)",
                field="version",
                offset=0,
                source=source,
            )
        count = _U64.unpack_from(view, 1)[0]
        entry_min = 1 + 16 + (8 if version >= 1 else 0)
        if count > (total - 9) // entry_min:
            raise FormatError(
                f"archive claims {count} members, more than its {total} bytes can list",
                field="member_count",
                offset=1,
                source=source,
            )
        members: dict[str, PackedMember] = {}
        pos = 9
        for _ in range(count):
            entry_at = pos
            name_length, pos = _read_varuint(view, pos, source, "name_length")
            fixed = 16 + (8 if version >= 1 else 0)
            if name_length > 4096 or pos + name_length + fixed > total:
                raise FormatError(
                    f"member entry with a {name_length}-byte name runs past the archive header",
                    field="name_length",
                    offset=entry_at,
                    source=source,
                )
            try:
                name = bytes(view[pos : pos + name_length]).decode("utf-8")
            except UnicodeDecodeError:
                raise FormatError(
                    "member name is not UTF-8", field="name", offset=pos, source=source
                ) from None
            pos += name_length
            offset, size = struct.unpack_from("<QQ", view, pos)
            pos += 16
            uncompressed = 0
            if version >= 1:
                uncompressed = _U64.unpack_from(view, pos)[0]
                pos += 8
            if name in members:
                raise FormatError(
                    f"member {name!r} listed twice", field="name", offset=entry_at, source=source
                )
            members[name] = PackedMember(name, offset, size, uncompressed)
        for member in members.values():
            if member.offset < pos or member.offset + member.size > total:
                raise FormatError(
                    f"member {member.name!r} spans bytes [{member.offset}, "
                    f"{member.offset + member.size}), outside the data area [{pos}, {total})",
                    field="member_offset",
                    offset=member.offset,
                    source=source,
                )
        return cls(version, members, view, source)

    def read(self, name: str) -> bytes:
        """Return one member's bytes.

        Args:
            name: The member's file name, e.g. ``"skp_idx_i.idx"``.

        Returns:
            A copy of its bytes.

        Raises:
            KeyError: no such member.
        """
        member = self.members[name]
        return bytes(self.data[member.offset : member.offset + member.size])


def _read_varuint(
    view: memoryview, pos: int, source: str, field: str, max_bytes: int = 10
) -> tuple[int, int]:
    """Decode a ClickHouse VarUInt (LEB128, at most 10 bytes) at ``pos``."""
    value = 0
    for index in range(max_bytes):
        if pos + index >= len(view):
            break
        byte = view[pos + index]
        value |= (byte & 0x7F) << (7 * index)
        if not byte & 0x80:
            return value, pos + index + 1
    raise FormatError("truncated or overlong VarUInt", field=field, offset=pos, source=source)


def escape_for_file_name(name: str) -> str:
    """Escape a name the way ClickHouse's ``escapeForFileName`` does.

    Args:
        name: An index or column name.

    Returns:
        The name with every byte outside ``[A-Za-z0-9_]`` written as ``%XX``.

    Example:
        >>> escape_for_file_name("a.b c")
        'a%2Eb%20c'
    """
    out = []
    for byte in name.encode("utf-8"):
        char = chr(byte)
        out.append(char if char.isascii() and (char.isalnum() or char == "_") else f"%{byte:02X}")
    return "".join(out)


def write_skip_index_files(
    directory: str | os.PathLike[str],
    index_name: str,
    granules: Iterable[bytes],
    *,
    codec: str = "LZ4",
    marks_extension: str = ".mrk2",
    marks_codec: str = DEFAULT_MARKS_CODEC,
) -> tuple[Path, Path]:
    """Write ``skp_idx_<name>.idx`` and its marks the way ClickHouse lays them out.

    Args:
        directory: Where to write (an existing directory).
        index_name: The index name.
        granules: Each index granule's serialized bytes, in order.
        codec: Codec of the ``.idx`` stream (``"NONE"``, ``"LZ4"``, ``"ZSTD(level)"``).
        marks_extension: ``.mrk``, ``.mrk2``, ``.mrk4`` or a compressed ``.cmrk*`` form.
        marks_codec: Codec of compressed marks.

    Returns:
        (path of the ``.idx`` file, path of the marks file).

    Raises:
        ValueError: an unsupported codec or marks extension.
        OSError: the directory is not writable.

    Example:
        >>> import tempfile
        >>> with tempfile.TemporaryDirectory() as d:
        ...     idx, mrk = write_skip_index_files(d, "i", [b"\\x01\\xff"], codec="NONE")
        ...     (idx.name, mrk.name, mrk.stat().st_size)
        ('skp_idx_i.idx', 'skp_idx_i.mrk2', 24)
    """
    fmt = MarksFormat.from_name(marks_extension)
    stream, marks = compression.write_compressed_stream(granules, codec)
    pairs = np.asarray(marks, dtype=np.uint64).reshape(-1, 2)
    marks_bytes = write_marks(pairs[:, 0], pairs[:, 1], fmt, codec=marks_codec)
    # ClickHouse names the files after the escaped index name (e.g. "a-b" -> "a%2Db").
    base = Path(directory) / f"skp_idx_{escape_for_file_name(index_name)}"
    idx_path = base.with_name(base.name + ".idx")
    marks_path = base.with_name(base.name + fmt.extension)
    write_atomically(idx_path, stream)
    write_atomically(marks_path, marks_bytes)
    return idx_path, marks_path
