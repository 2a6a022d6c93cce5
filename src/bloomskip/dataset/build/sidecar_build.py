"""A sidecar's build: the files new or changed since the last one, run as build tasks.

Every build runs its work through one scheduler (``build/tasks.py``): this process on ``jobs``
threads, or a Dask cluster. A sidecar's tasks use an
:class:`~bloomskip.dataset.build.entry_writer.EntryWriter`, which hands each file's entry back;
the build then writes the one sidecar file. The sidecar is the same bytes whichever runs them.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from bloomskip.dataset.build.entry_writer import EntryWriter, local_file
from bloomskip.dataset.build.indexing import (
    PreparedIndex,
    progress_bar,
    reuse_entry,
    select_indexes,
    worker_count,
)
from bloomskip.dataset.index.sidecar import FileEntry, Sidecar
from bloomskip.dataset.listing.files import SourceFile
from bloomskip.dataset.vocabulary import relative_to
from bloomskip.errors import BloomskipError


def build_sidecar(
    files: Sequence[SourceFile],
    root: Path,
    indexes: Sequence[PreparedIndex],
    granule: str | int,
    previous: Sidecar | None,
    show_progress: bool | None = None,
    jobs: int | None = None,
    client=None,
) -> tuple[Sidecar, list[str]]:
    """Index the files that are new or changed since ``previous`` and keep the rest.

    Args:
        files: The dataset's files.
        root: The dataset's root directory; the sidecar names files relative to it.
        indexes: The indexes to build.
        granule: ``"row-group"`` or rows per granule.
        previous: The current sidecar; a file's section of an index is reused when the sidecar
            holds that index with the same granule and the file's identity is unchanged.
        show_progress: Force the progress bar on or off (default: on a terminal only).
        jobs: Threads building granules in this process (default: one per CPU); the granule
            builders run in C without the GIL, and the bytes do not depend on the count.
        client: A ``distributed.Client`` whose workers run the tasks (they must see the same
            files at the same paths); ``jobs`` is then unused.

    Returns:
        ``(sidecar, rebuilt)``: the new sidecar and the relative paths that were (re)indexed.

    Raises:
        BloomskipError: A file cannot be read or indexed (named), or changed meanwhile.
    """
    from bloomskip.dataset.build import tasks

    specs = [prepared.spec for prepared in indexes]
    # Each index's sections are reused per file: a build that adds an index reads the files
    # for the new one only.
    reusable = previous if previous is not None and previous.granule == granule else None
    old_number = {spec: n for n, spec in enumerate(reusable.indexes)} if reusable else {}
    entries: dict[str, FileEntry] = {}
    kept: dict[str, FileEntry] = {}
    todo: list[tuple[SourceFile, str]] = []
    missing = [prepared for prepared in indexes if prepared.spec not in old_number]
    for source in files:
        relative = relative_to(source.path, root)
        old = reusable.files.get(relative) if reusable is not None else None
        entry = reuse_entry(old, source) if old_number else None
        if entry is not None and not missing:
            entries[relative] = select_indexes(entry, [old_number[spec] for spec in specs])
            continue
        if entry is not None:
            kept[relative] = entry
        todo.append((source, relative))
    writer = EntryWriter(root, {relative: source.format for source, relative in todo})
    listed = {relative: _local(source, relative) for source, relative in todo}
    threads = 1 if client is not None else (worker_count() if jobs is None else max(1, jobs))
    jobs_to_run = []
    # Files with reusable sections need only the new indexes; the others need all of them.
    for wanted, names in (
        (indexes, [relative for _, relative in todo if relative not in kept]),
        (missing, [relative for _, relative in todo if relative in kept]),
    ):
        if not names:
            continue
        chosen = [listed[name] for name in sorted(names)]
        group_bytes = {
            item.key: writer.row_group_bytes(item)
            for item in chosen
            if item.info.size > tasks.TASK_TARGET_BYTES and writer.formats[item.key] == "parquet"
        }
        target, most = tasks.TASK_TARGET_BYTES, tasks.TASK_MAX_FILES
        planned = tasks.plan_tasks(chosen, target, most, group_bytes)
        base = tasks.BuildTask(writer, (), tuple(wanted), granule, threads)
        jobs_to_run += tasks.make_jobs(planned, base, group_bytes)
    total = sum(item.info.size for item in listed.values())
    with progress_bar(total, "indexing", show_progress) as bar:
        results = tasks.run_tasks(jobs_to_run, client=client, progress=bar)
    for result in results:
        for relative, built in result.written.items():
            old = kept.get(relative)
            entries[relative] = built if old is None else _splice(old, built, specs, old_number)
    ordered = {relative_to(source.path, root): None for source in files}
    sidecar = Sidecar(granule, specs, {name: entries[name] for name in ordered})
    return sidecar, [relative for _, relative in todo]


def _local(source: SourceFile, relative: str):
    """A file as a build task takes it (its size sizes the tasks).

    Raises:
        BloomskipError: It cannot be stat-ed.
    """
    try:
        stat = os.stat(source.path)
    except OSError as exc:
        raise BloomskipError(f"{source.path}: cannot read it: {exc}") from exc
    return local_file(relative, stat.st_size, stat.st_mtime_ns)


def _splice(old: FileEntry, built: FileEntry, specs, old_number) -> FileEntry:
    """One entry from the reused sections of ``old`` and the newly built ones of ``built``
    (which holds, in order, the indexes ``old`` lacks)."""
    if list(old.granule_rows) != list(built.granule_rows) or old.identity != built.identity:
        raise BloomskipError(f"{old.path}: changed while it was being indexed; build again")
    fresh = iter(built.payloads)
    payloads = [
        old.payloads[old_number[spec]] if spec in old_number else next(fresh) for spec in specs
    ]
    return FileEntry(old.path, old.format, old.identity, old.granule_rows, payloads)
