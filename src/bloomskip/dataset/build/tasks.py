"""Every build as a map over tasks: in this process on all cores, or on Dask.

The one build scheduler, for either index layout: a task's writer decides what becomes of the
entries it builds. A segmented index's ``SegmentWriter`` writes them as a segment where the
task runs (below); a sidecar's ``EntryWriter`` hands them back to the build, which writes the
one file (``build/sidecar_build.py``).

A build is planned as a list of :class:`PlannedTask` (a batch of files, cut in key order by
size and count, so that the plan is the same however it runs), each task is run where it is
scheduled, and the driver commits one manifest version with the segments the tasks return. A
task reads its files straight from their storage, builds their indexes, writes its own segment
to the index location, and returns only a :class:`TaskResult` (the segment's manifest entry and
counts): no table data passes through the driver or a scheduler. The plan does not depend on
the number of workers, and a segment's bytes depend only on its task's files, so ``jobs=1``,
``jobs=2`` and a Dask cluster write the same segments.

A Parquet file larger than a task is split into row-group ranges: each range is a task of its
own that builds the granules starting in it and returns them (on Dask they go from worker to
worker, never through the driver), and one more task joins them in order and writes the file's
segment, the same bytes a whole-file task writes (``build.join_parts``).

A task reports the rows and bytes it reads, granule by granule, to the build's one progress bar
(bytes of the files indexed). A build that fails or is interrupted (Ctrl-C) stops its running
tasks at their next granule and deletes the segments its finished tasks wrote: none of them is
committed, and no other build knows their keys. On Dask the tasks learn of it through a Dask
``Event``, and a task still running :data:`DASK_STOP_SECONDS` later may leave a segment behind
(removed by ``vacuum``). Dask runs a task again on another worker when its worker is lost, and
the manifest is committed only once every task has finished.

Example:
    >>> plan_tasks([], target_bytes=1, max_files=1)
    []
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor, wait
from contextlib import contextmanager, suppress
from dataclasses import dataclass, replace

from bloomskip._store import one_line
from bloomskip.errors import BloomskipError

#: A task covers about this many bytes of Parquet. Each task writes one segment, and a query
#: reads one range per segment and index it uses: larger tasks mean fewer requests per query
#: and fewer scheduler round trips; 1 GiB of Parquet makes a segment of some 20 MB.
TASK_TARGET_BYTES = 1 << 30
#: ... and at most this many files, so that small files still make tasks of a useful size.
TASK_MAX_FILES = 512
#: A task on Dask asks the scheduler whether its build was cancelled at most this often.
DASK_CHECK_SECONDS = 0.5
#: A cancelled build waits this long for its tasks on Dask to stop before it deletes what they
#: wrote (a task stops at its next granule once it has seen the cancellation).
DASK_STOP_SECONDS = 10.0


class _BuildCancelled(Exception):
    """Raised inside a task whose build was cancelled: the task stops between granules and
    writes nothing."""


#: What a task calls with ``(rows, bytes)`` as it reads its granules (see :class:`BuildTask`).
Progress = Callable[[int, int], None]


@dataclass(frozen=True)
class BuildTask:
    """One batch of files to index into one segment (picklable, sent to a worker).

    Attributes:
        writer: Reads the data and writes the segment where the task runs, or hands the
            entries back (a ``SegmentWriter`` or an ``EntryWriter``; either pickles
            without the driver's open stores).
        files: The files, as the driver's listing described them.
        prepared: The indexes, bound to the dataset's columns and types.
        granule: ``"row-group"`` or rows per granule.
        threads: Threads for the granules of a file (1 when tasks run in parallel).
        groups: ``(first, end)``: the task builds only these row groups of its one file (a
            part, see :func:`run_part`); None: whole files.
        progress: Called with the rows of each granule read and the bytes of the file they
            stand for; raises :class:`_BuildCancelled` once the build is cancelled. Set by
            :func:`run_tasks` for each run; None: nothing is reported.
    """

    writer: object
    files: tuple
    prepared: tuple
    granule: str | int
    threads: int = 1
    groups: tuple[int, int] | None = None
    progress: Progress | None = None


@dataclass(frozen=True)
class PlannedTask:
    """One task of a plan: a batch of files, or one file in row-group ranges.

    Attributes:
        files: The files, in key order.
        ranges: For a file split in parts, each part's ``(first, end)`` row groups; empty
            for a batch.
    """

    files: tuple
    ranges: tuple[tuple[int, int], ...] = ()


@dataclass(frozen=True)
class PartResult:
    """What a part task hands to the task that joins a file's parts (never to the driver).

    Attributes:
        entry: The part's sidecar entry (see ``build.build_file`` with ``groups``).
        schema: The file's Arrow schema.
        rows: Rows indexed.
    """

    entry: object
    schema: object
    rows: int


@dataclass(frozen=True)
class TaskResult:
    """What a task sends back: what its writer wrote, and what it read.

    Attributes:
        written: A segment's manifest entry to commit (``SegmentWriter``), or the files'
            entries by name (``EntryWriter``: a sidecar's build writes them).
        rows: Rows indexed.
        bytes: Bytes of the files indexed (their sizes).
        seconds: Time the task took on its worker.
    """

    written: object
    rows: int
    bytes: int
    seconds: float


def plan_tasks(
    files: Sequence,
    target_bytes: int,
    max_files: int,
    group_bytes: Mapping[str, Sequence[int]] | None = None,
) -> list[PlannedTask]:
    """Cut files (in the given order) into tasks of about ``target_bytes``, of even size.

    The files are cut into ``ceil(bytes / target_bytes)`` batches (more if a batch would hold
    more than ``max_files``) of about equal bytes, so that 1.5 GB at a 1 GiB target makes two
    tasks of 0.74 GB rather than one of 1.1 GB and one of 0.4 GB: one worker would wait for
    the other. The plan depends on the files alone, never on the workers.

    Args:
        files: ``ListedFile`` objects, in key order.
        target_bytes: The bytes a task is sized for.
        max_files: The most files a task holds.
        group_bytes: The bytes of each row group of the files larger than ``target_bytes``
            (from their footers): such a file is a task of its own, split into row-group
            ranges of even size (see :func:`split_ranges`), when it has more than one.

    Returns:
        The tasks, in key order of their first file; the same for the same input, whatever
        runs them.

    Example:
        >>> from bloomskip._store import ObjectInfo
        >>> from bloomskip.dataset.listing.prefix import ListedFile
        >>> files = [ListedFile(f"{n}.parquet", ObjectInfo("", 60, 0)) for n in range(5)]
        >>> [len(task.files) for task in plan_tasks(files, target_bytes=100, max_files=10)]
        [2, 2, 1]
        >>> big = [ListedFile("big.parquet", ObjectInfo("", 300, 0))]
        >>> plan_tasks(big, 100, 10, {"big.parquet": [100, 100, 100]})[0].ranges
        ((0, 1), (1, 2), (2, 3))
    """
    tasks: list[PlannedTask] = []
    rest = []
    for listed in files:
        ranges = split_ranges((group_bytes or {}).get(listed.key, ()), target_bytes)
        if len(ranges) > 1:
            tasks.append(PlannedTask((listed,), ranges))
        else:
            rest.append(listed)
    sizes = [listed.info.size for listed in rest]
    parts = max(_ceil_div(sum(sizes), target_bytes), _ceil_div(len(rest), max_files))
    tasks += [
        PlannedTask(tuple(rest[first:end])) for first, end in even_ranges(sizes, parts, max_files)
    ]
    return sorted(tasks, key=lambda task: task.files[0].key)


def split_ranges(group_bytes: Sequence[int], target_bytes: int) -> tuple[tuple[int, int], ...]:
    """A file's row groups in ``ceil(bytes / target_bytes)`` ranges of even bytes (at most one
    range per row group): a 185 MB file at a 128 MiB target makes two ranges of about 92 MB,
    not one of 128 and one of 57.

    Example:
        >>> split_ranges([60, 60, 60, 10], 100)
        ((0, 2), (2, 4))
    """
    return even_ranges(group_bytes, _ceil_div(sum(group_bytes), target_bytes))


def even_ranges(
    sizes: Sequence[int], parts: int, max_items: int | None = None
) -> tuple[tuple[int, int], ...]:
    """Cut ``sizes`` (in order) into ``parts`` consecutive ranges of about equal sum.

    Each range holds at least one item and at most ``max_items`` (more ranges are made where
    that needs them); with fewer items than ``parts``, one range per item.

    Example:
        >>> even_ranges([5, 5, 5, 5, 1], 2)
        ((0, 2), (2, 5))
    """
    count = len(sizes)
    if not count:
        return ()
    parts = max(1, min(count, parts))
    ranges, first, size, remaining = [], 0, 0, sum(sizes)
    for number, item in enumerate(sizes):
        left = parts - len(ranges)  # ranges still to make, the current one included
        if number > first:
            ideal = remaining / left
            full = max_items is not None and number - first >= max_items
            # Close before this item when each later range needs one of the items left, or
            # when the range ends nearer its ideal size without this item than with it.
            must = count - number == left - 1
            over = size + item > ideal and size + item - ideal > ideal - size
            if full or (left > 1 and (must or over)):
                ranges.append((first, number))
                first, remaining, size = number, remaining - size, 0
        size += item
    ranges.append((first, count))
    return tuple(ranges)


def _ceil_div(numerator: int, denominator: int) -> int:
    return -(-numerator // max(1, denominator))


def run_task(task: BuildTask) -> TaskResult:
    """Index a task's files and write their segment; runs on a worker (or in the driver).

    Raises:
        BloomskipError: A file cannot be read or indexed (the message names it).
        _BuildCancelled: The build was cancelled; nothing was written.
        StorageError: The segment cannot be written.
    """
    started = time.perf_counter()
    progress = task.progress or _unreported
    progress(0, 0)  # a task of a cancelled build reads nothing
    with _task_errors(task), _granule_pool(task.threads) as executor:
        written, rows = task.writer.write_files(
            task.files, task.prepared, task.granule, executor, 2 * max(1, task.threads), progress
        )
    return TaskResult(
        written,
        rows,
        sum(listed.info.size for listed in task.files),
        time.perf_counter() - started,
    )


def run_part(task: BuildTask) -> PartResult:
    """Build the granules of one row-group range of a file; runs on a worker.

    Raises:
        BloomskipError: The file cannot be read or indexed (the message names it).
        _BuildCancelled: The build was cancelled.
    """
    progress = task.progress or _unreported
    progress(0, 0)
    with _task_errors(task), _granule_pool(task.threads) as executor:
        entry, schema = task.writer.build_part(
            task.files[0],
            task.prepared,
            task.granule,
            range(*task.groups),
            executor,
            2 * max(1, task.threads),
            progress,
        )
    return PartResult(entry, schema, sum(entry.granule_rows))


def join_parts(task: BuildTask, *parts: PartResult) -> TaskResult:
    """Join a file's parts, in order, and write its segment; runs on a worker.

    Raises:
        BloomskipError: The file changed between its parts.
        _BuildCancelled: The build was cancelled; nothing was written.
        StorageError: The segment cannot be written.
    """
    from bloomskip.dataset.build import indexing as build

    started = time.perf_counter()
    (task.progress or _unreported)(0, 0)
    with _task_errors(task):
        entry = build.join_parts([part.entry for part in parts])
        written = task.writer.write_entries(
            {entry.path: entry}, task.prepared, task.granule, task.files, [parts[0].schema]
        )
    return TaskResult(
        written,
        sum(part.rows for part in parts),
        task.files[0].info.size,
        time.perf_counter() - started,
    )


def _unreported(_rows: int, _bytes: int) -> None:
    """The progress of a task run on its own (no build's bar, never cancelled)."""


@contextmanager
def _granule_pool(threads: int) -> Iterator[ThreadPoolExecutor]:
    """The threads a task builds its granules on.

    A cancelled task stops without waiting for the granules being built (at most one per
    thread, each reading a row group): their results are dropped, and nothing is written.
    """
    executor = ThreadPoolExecutor(max_workers=max(1, threads))
    cancelled = False
    try:
        yield executor
    except _BuildCancelled:
        cancelled = True
        raise
    finally:
        executor.shutdown(wait=not cancelled, cancel_futures=cancelled)


@contextmanager
def _task_errors(task: BuildTask) -> Iterator[None]:
    """Turn what a task raises into a one-line :class:`BloomskipError` naming its files."""
    try:
        yield
    except _BuildCancelled:
        raise
    except BloomskipError as exc:
        # Sent back to the driver as the message alone: an exception that does not pickle
        # (one with a deep or foreign cause chain) would leave a Dask future pending forever.
        raise BloomskipError(str(exc)) from None
    except Exception as exc:
        more = f" and {len(task.files) - 1} more files" if len(task.files) > 1 else ""
        raise BloomskipError(
            f"building {task.files[0].key}{more} failed: {type(exc).__name__}: {exc}"
        ) from None


@dataclass(frozen=True)
class Job:
    """A planned task made runnable: a task, or a file's part tasks and the task joining them.

    Attributes:
        task: The task writing the segment (``run_task``, or ``join_parts`` after the parts).
        parts: The part tasks of a split file, in row-group order; empty for a batch.
        part_bytes: The bytes of each part's row groups (progress).
    """

    task: BuildTask
    parts: tuple[BuildTask, ...] = ()
    part_bytes: tuple[int, ...] = ()


def make_jobs(planned: Sequence[PlannedTask], base: BuildTask, group_bytes) -> list[Job]:
    """The runnable jobs of a plan, every task a copy of ``base`` with its own files and range.

    Args:
        planned: From :func:`plan_tasks`.
        base: The build's common fields (``files`` is replaced).
        group_bytes: The row-group bytes :func:`plan_tasks` split files by.
    """
    jobs = []
    for item in planned:
        task = replace(base, files=item.files)
        sizes = group_bytes.get(item.files[0].key, ()) if item.ranges else ()
        jobs.append(
            Job(
                task,
                tuple(replace(task, groups=groups) for groups in item.ranges),
                tuple(sum(sizes[first:end]) for first, end in item.ranges),
            )
        )
    return jobs


def run_tasks(jobs: list[Job], *, client=None, progress=None) -> list:
    """Run ``jobs`` in this process (each task on its own ``threads``), or on a Dask ``client``.

    When a task fails, or the build is interrupted (``KeyboardInterrupt``, Ctrl-C), the running
    tasks are stopped at their next granule, the tasks not started are cancelled, and what the
    finished ones wrote is discarded (their writer's ``discard``: a segment is deleted), then
    the error is raised: nothing of an unfinished build is committed, so nothing it wrote is
    kept.

    Args:
        jobs: The plan, from :func:`make_jobs`.
        client: A ``distributed.Client``; its workers run the tasks.
        progress: A tqdm bar counting the bytes of the jobs' files; its postfix shows the rows
            read. Tasks in this process advance it granule by granule; on Dask, each task and
            part advances it when it finishes.

    Returns:
        The :class:`TaskResult` of each job, in plan order.

    Raises:
        BloomskipError: A task failed (its message), or the workers cannot run bloomskip.
        KeyboardInterrupt: The build was interrupted.
    """
    tracker = _BuildProgress(progress)
    results: list = [None] * len(jobs)
    try:
        if client is not None:
            _run_on_dask(jobs, client, tracker, results)
        else:
            _run_here(jobs, tracker, results)
    except BaseException:
        _discard(jobs, results)
        raise
    return results


def _run_here(jobs: list[Job], tracker: _BuildProgress, results: list) -> None:
    """Run ``jobs`` on threads of this process, filling ``results`` as they finish (on an
    error, with those finished by the time the others stopped)."""

    def run(job: Job, progress: _JobProgress) -> TaskResult:
        if not job.parts:
            return run_task(replace(job.task, progress=progress))
        parts = [run_part(replace(part, progress=progress)) for part in job.parts]
        return join_parts(replace(job.task, progress=progress), *parts)

    # Two jobs at once when they have threads to share: one job's serial steps (opening its
    # files, encoding and writing its segment) overlap the other's granule builds.
    width = 2 if len(jobs) > 1 and jobs[0].task.threads > 1 else 1
    shares = [tracker.job(_job_bytes(job)) for job in jobs]
    with ThreadPoolExecutor(max_workers=width) as outer:
        futures = [outer.submit(run, job, share) for job, share in zip(jobs, shares, strict=True)]
        try:
            for number, future in enumerate(futures):
                results[number] = future.result()
                shares[number].finish(results[number].rows)
        except BaseException:
            tracker.cancel()
            for future in futures:
                future.cancel()
            wait(futures)  # the running tasks stop at their next granule
            for number, future in enumerate(futures):
                if not future.cancelled() and future.exception() is None:
                    results[number] = future.result()
            raise


def _job_bytes(job: Job) -> int:
    return sum(listed.info.size for listed in job.task.files)


def _discard(jobs: list[Job], results: list) -> None:
    """Discard what the finished tasks of a build that will not commit wrote."""
    for job, result in zip(jobs, results, strict=True):
        # A delete that fails leaves the segment to a vacuum: the build's own error is the one
        # to report.
        if result is not None:
            with suppress(BloomskipError):
                job.task.writer.discard(result.written)


class _BuildProgress:
    """The build's bar (bytes of the files indexed, with the rows read as its postfix),
    advanced from the threads running the tasks, and the flag that stops those tasks.

    Args:
        bar: A tqdm bar, or None.
    """

    def __init__(self, bar) -> None:
        self.bar = bar
        self.cancelled = threading.Event()
        self._lock = threading.Lock()
        self.rows = 0

    def job(self, budget: int) -> _JobProgress:
        """The share of a job reading ``budget`` bytes of files."""
        return _JobProgress(self, budget)

    def cancel(self) -> None:
        """Stop the tasks running in this process at their next granule."""
        self.cancelled.set()

    def advance(self, nbytes: int, rows: int) -> None:
        with self._lock:
            self.rows += rows
            if self.bar is not None:
                self.bar.set_postfix(rows=f"{self.rows:,}", refresh=False)
                self.bar.update(nbytes)


class _JobProgress:
    """One job's share of the build's bar: its tasks report what they read as they read it
    (called as a task's ``progress``), and it is topped up to the job's bytes and rows when the
    job finishes, so that the bar ends at the files' bytes however finely a task reported.

    Called as a task's progress, it raises :class:`_BuildCancelled` once the build is
    cancelled.
    """

    def __init__(self, build: _BuildProgress, budget: int) -> None:
        self.build = build
        self.budget = budget
        self.bytes = self.rows = 0

    def __call__(self, rows: int, nbytes: int) -> None:
        if self.build.cancelled.is_set():
            raise _BuildCancelled()
        self.advance(rows, nbytes)

    def advance(self, rows: int, nbytes: int) -> None:
        nbytes = max(0, min(nbytes, self.budget - self.bytes))
        self.bytes += nbytes
        self.rows += rows
        self.build.advance(nbytes, rows)

    def finish(self, rows: int) -> None:
        """The job finished, having read ``rows`` rows."""
        self.advance(rows - self.rows, self.budget - self.bytes)


class _CancelledOnDask:
    """The progress of a task on Dask: the driver's bar advances as tasks finish, so this only
    stops the task once its build is cancelled (a Dask ``Event`` the driver sets), asking the
    scheduler at most every :data:`DASK_CHECK_SECONDS`.

    Args:
        name: The event's name.
    """

    def __init__(self, name: str) -> None:
        self.name = name
        self._asked = -DASK_CHECK_SECONDS

    def __call__(self, rows: int, nbytes: int) -> None:
        now = time.monotonic()
        if now - self._asked < DASK_CHECK_SECONDS:
            return
        self._asked = now
        from distributed import Event

        if Event(self.name).is_set():
            raise _BuildCancelled()


def _check_workers(client) -> None:
    """Fail at once, in one line, when a worker cannot import bloomskip.

    Such a worker cannot even unpickle a task: distributed drops the message and the task
    would wait forever. The probe is a builtin (``exec`` of an import), which any worker
    unpickles, so its ``ImportError`` comes back.

    Raises:
        BloomskipError: A worker lacks bloomskip (the worker is named).
    """
    answers = client.run(exec, "import bloomskip.dataset.build.tasks", on_error="return")
    for worker, answer in sorted(answers.items()):
        if isinstance(answer, BaseException):
            raise BloomskipError(
                f"the Dask worker {worker} cannot run bloomskip's build "
                f"({type(answer).__name__}: {one_line(answer)}); install the same bloomskip "
                "on every worker"
            )


def _run_on_dask(jobs: list[Job], client, tracker: _BuildProgress, results: list) -> None:
    """Run ``jobs`` on the workers of ``client``, filling ``results`` as they finish (on an
    error, with those finished by the time the others stopped)."""
    import secrets

    from distributed import Event, as_completed

    _check_workers(client)

    # Keys of their own: two builds sharing a client never share a task.
    build = secrets.token_hex(4)
    cancelled = _CancelledOnDask(f"bloomskip-build-{build}-cancelled")
    final, parts, shares, part_futures = {}, {}, {}, []
    try:
        for number, job in enumerate(jobs):
            key = f"bloomskip-build-{build}-{number}"
            shares[number] = tracker.job(_job_bytes(job))
            task = replace(job.task, progress=cancelled)
            # A split file's parts: their granules go from their workers to the joining one,
            # not to the driver.
            ranges = [replace(part, progress=cancelled) for part in job.parts]
            futures = [
                client.submit(run_part, part, pure=False, key=f"{key}-part-{count}")
                for count, part in enumerate(ranges)
            ]
            parts.update(
                {
                    future.key: (number, size)
                    for future, size in zip(futures, job.part_bytes, strict=True)
                }
            )
            part_futures += futures
            runner = join_parts if job.parts else run_task
            final[number] = client.submit(runner, task, *futures, pure=False, key=key)
        numbers = {future.key: number for number, future in final.items()}
        for future in as_completed(list(final.values()) + part_futures):
            if future.key in parts and future.status == "finished":
                number, size = parts[future.key]
                shares[number].advance(0, size)  # its result stays on the workers
                continue
            try:
                result = future.result()
            except BloomskipError:
                raise
            except (ImportError, AttributeError) as exc:
                raise BloomskipError(
                    f"the Dask workers cannot run bloomskip's build ({type(exc).__name__}: "
                    f"{exc}); install the same bloomskip on every worker"
                ) from exc
            except OSError as exc:
                raise BloomskipError(f"a Dask worker failed to build a segment: {exc}") from exc
            number = numbers[future.key]
            results[number] = result
            shares[number].finish(result.rows)
    except BaseException:
        _stop_on_dask(Event(cancelled.name, client=client), final, results)
        client.cancel(list(final.values()) + part_futures)
        raise


def _stop_on_dask(event, final: dict, results: list) -> None:
    """Stop the tasks of a failed or interrupted build on Dask, and fill ``results`` with
    those that finished meanwhile (their segments are then discarded).

    A task not started yet stops as it starts, a running one at its next granule. One still
    running after :data:`DASK_STOP_SECONDS` is left to stop when it next asks (the event stays
    set for it), and a segment it may still write is left to ``vacuum``.
    """
    from distributed import wait as wait_for

    try:
        event.set()
        wait_for(list(final.values()), timeout=DASK_STOP_SECONDS)
        event.clear()
    except (OSError, TimeoutError):
        pass  # the scheduler is gone, or a task is slow to stop: discard what finished
    for number, future in final.items():
        if results[number] is None and future.status == "finished":
            with suppress(OSError):
                results[number] = future.result()


def connect(address: str, timeout: float = 10.0):
    """A ``distributed.Client`` for the scheduler at ``address``, or a one-line error.

    Raises:
        BloomskipError: Dask is not installed, or the scheduler cannot be reached.
    """
    try:
        from distributed import Client
    except ImportError as exc:
        raise BloomskipError(
            "--scheduler needs Dask's distributed scheduler: pip install 'bloomskip[dask]'"
        ) from exc
    try:
        return Client(address, timeout=timeout)
    except (OSError, TimeoutError, ValueError) as exc:
        raise BloomskipError(f"cannot reach the Dask scheduler at {address}: {exc}") from exc
