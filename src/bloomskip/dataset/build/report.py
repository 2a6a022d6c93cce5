"""What a build did: one report for either index layout."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

SIDECAR = "sidecar"
SEGMENTED = "segmented"


@dataclass
class BuildReport:
    """What :meth:`bloomskip.Dataset.build_index` (or ``compact``) did, wherever the index lives.

    Attributes:
        index: Where the index lives: the sidecar file, or the segmented index's location.
        layout: ``"sidecar"`` (one file) or ``"segmented"`` (segments and manifest versions).
        files: Files in the dataset.
        rebuilt: Names (relative paths, keys) of the files (re)indexed; the others were reused.
        index_bytes: Size of the whole index after the build: the sidecar, or every live
            segment.
        bytes_written: Bytes this build wrote (0 when the index was already current).
        removed: Names of files dropped from the index because they no longer exist.
        version: The manifest version committed (the previous one when nothing changed);
            None for a sidecar, which has no versions.
        segments_written: New segment objects (0 for a sidecar).
        warnings: One line per index no predicate can ever use, or file left unindexed.
        migrated: Names among ``rebuilt`` whose index was taken from the folder's single-file
            sidecar (unchanged files, same definitions) rather than from their data.
        segments_merged: Small segments the build's automatic compaction merged afterwards
            (their bytes and the merged segments are counted in the figures above).

    Example:
        >>> report = BuildReport("logs/_bloomskip.index", SIDECAR, 2, ["a.parquet"], 900, 900)
        >>> report.sidecar, report.to_dict()["files_reindexed"]
        (PosixPath('logs/_bloomskip.index'), ['a.parquet'])
    """

    index: str
    layout: str
    files: int
    rebuilt: list[str]
    index_bytes: int
    bytes_written: int
    removed: list[str] = field(default_factory=list)
    version: int | None = None
    segments_written: int = 0
    warnings: list[str] = field(default_factory=list)
    migrated: list[str] = field(default_factory=list)
    segments_merged: int = 0

    @property
    def sidecar(self) -> Path | None:
        """The single-file index's path; None for a segmented index."""
        return Path(self.index) if self.layout == SIDECAR else None

    def summary(self) -> str:
        """One line: what the build did (``bloomskip index build`` prints it)."""
        done = f"{self.files} files, {len(self.rebuilt)} (re)indexed"
        if self.layout == SIDECAR:
            return f"{self.index}: {done}, {self.index_bytes:,} bytes"
        merged = f", {self.segments_merged} merged" if self.segments_merged else ""
        return (
            f"{self.index}: version {self.version}, {done}, {len(self.removed)} removed, "
            f"{self.segments_written} new segment{'s' * (self.segments_written != 1)}{merged}, "
            f"{self.bytes_written:,} bytes written"
        )

    def to_dict(self) -> dict:
        """The report as JSON-ready data (``index build --json``): the fields of its layout."""
        common = {"index_layout": self.layout, "index": str(self.index), "files": self.files}
        if self.layout == SIDECAR:
            return common | {
                "files_reindexed": self.rebuilt,
                "index_bytes": self.index_bytes,
                "warnings": self.warnings,
            }
        return common | {
            "version": self.version,
            "files_reindexed": self.rebuilt,
            "files_reindexed_from_sidecar": self.migrated,
            "files_removed": self.removed,
            "segments_written": self.segments_written,
            "segments_merged": self.segments_merged,
            "bytes_written": self.bytes_written,
            "index_bytes": self.index_bytes,
            "warnings": self.warnings,
        }
