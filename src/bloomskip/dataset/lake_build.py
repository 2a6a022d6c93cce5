"""Building a segmented index as a map over tasks: in this process on all cores, or on Dask.

A build is planned as a list of :class:`BuildTask` (a batch of files, cut in key order by size
and count, so that the plan is the same however it runs), each task is run where it is
scheduled, and the driver commits one manifest version with the segments the tasks return. A
task reads its files straight from their storage, builds their indexes, writes its own segment
to the index location, and returns only a :class:`TaskResult` (the segment's manifest entry and
counts): no table data passes through the driver or a scheduler. The plan does not depend on
the number of workers, and a segment's bytes depend only on its task's files, so ``jobs=1``,
``jobs=2`` and a Dask cluster write the same segments.

A task that fails, or whose worker dies, leaves at most an unreferenced segment behind (removed
by ``vacuum``); Dask runs a task again on another worker when its worker is lost, and the
manifest is committed only once every task has finished.

Example:
    >>> plan_tasks([], target_bytes=1, max_files=1)
    []
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from bloomskip._store import one_line
from bloomskip.errors import BloomskipError

#: A task covers about this many bytes of Parquet. Each task writes one segment, and a query
#: reads one range per segment and index it uses: larger tasks mean fewer requests per query
#: and fewer scheduler round trips; 1 GiB of Parquet makes a segment of some 20 MB.
TASK_TARGET_BYTES = 1 << 30
#: ... and at most this many files, so that small files still make tasks of a useful size.
TASK_MAX_FILES = 512


@dataclass(frozen=True)
class BuildTask:
    """One batch of files to index into one segment (picklable, sent to a worker).

    Attributes:
        location: The dataset's location (URI or path) as the driver was given it.
        index_location: Where the segment goes.
        filesystem: The caller's pyarrow filesystem, if any (pyarrow filesystems pickle).
        files: The files, as the driver's listing described them.
        prepared: The indexes, bound to the dataset's columns and types.
        granule: ``"row-group"`` or rows per granule.
        threads: Threads for the granules of a file (1 when tasks run in parallel).
    """

    location: str
    index_location: str
    filesystem: object
    files: tuple
    prepared: tuple
    granule: str | int
    threads: int = 1


@dataclass(frozen=True)
class TaskResult:
    """What a task sends back: its segment's manifest entry and what it read.

    Attributes:
        segment: The entry to commit.
        rows: Rows indexed.
        bytes: Bytes of the files indexed (their sizes).
        seconds: Time the task took on its worker.
    """

    segment: object
    rows: int
    bytes: int
    seconds: float


def plan_tasks(files: Sequence, target_bytes: int, max_files: int) -> list[tuple]:
    """Cut files (in the given order) into batches of about ``target_bytes``.

    Args:
        files: ``ListedFile`` objects, in key order.
        target_bytes: A batch is closed once it holds this many bytes.
        max_files: ... or this many files.

    Returns:
        The batches, each a tuple of files; the same for the same input, whatever runs them.

    Example:
        >>> from bloomskip._store import ObjectInfo
        >>> from bloomskip.dataset.lake import ListedFile
        >>> files = [ListedFile(f"{n}.parquet", ObjectInfo("", 60, 0)) for n in range(5)]
        >>> [len(batch) for batch in plan_tasks(files, target_bytes=100, max_files=10)]
        [2, 2, 1]
    """
    batches: list[tuple] = []
    current: list = []
    size = 0
    for listed in files:
        current.append(listed)
        size += listed.info.size
        if size >= target_bytes or len(current) >= max_files:
            batches.append(tuple(current))
            current, size = [], 0
    if current:
        batches.append(tuple(current))
    return batches


def run_task(task: BuildTask) -> TaskResult:
    """Index a task's files and write their segment; runs on a worker (or in the driver).

    Raises:
        BloomskipError: A file cannot be read or indexed (the message names it).
        StorageError: The segment cannot be written.
    """
    import time
    from concurrent.futures import ThreadPoolExecutor

    from bloomskip.dataset.lake import LakeDataset

    started = time.perf_counter()
    try:
        lake = LakeDataset(
            task.location,
            index_location=task.index_location,
            filesystem=task.filesystem,
        )
        with ThreadPoolExecutor(max_workers=max(1, task.threads)) as executor:
            segment, rows = lake.write_task_segment(
                task.files, task.prepared, task.granule, executor, 2 * max(1, task.threads)
            )
    except BloomskipError as exc:
        # Sent back to the driver as the message alone: an exception that does not pickle
        # (one with a deep or foreign cause chain) would leave a Dask future pending forever.
        raise BloomskipError(str(exc)) from None
    except Exception as exc:
        raise BloomskipError(
            f"building {task.files[0].key} and {len(task.files) - 1} more files failed: "
            f"{type(exc).__name__}: {exc}"
        ) from None
    return TaskResult(
        segment,
        rows,
        sum(listed.info.size for listed in task.files),
        time.perf_counter() - started,
    )


def run_tasks(tasks: list[BuildTask], *, client=None, progress=None) -> list:
    """Run ``tasks`` in this process (each on its own ``threads``), or on a Dask ``client``.

    Args:
        tasks: The plan.
        client: A ``distributed.Client``; its workers run the tasks.
        progress: A tqdm bar counting bytes; its postfix shows files and rows.

    Returns:
        The :class:`TaskResult` of each task, in plan order.

    Raises:
        BloomskipError: A task failed (its message), or the workers cannot run bloomskip.
    """
    results: list = [None] * len(tasks)
    files = rows = 0

    def done(number: int, result: TaskResult) -> None:
        nonlocal files, rows
        results[number] = result
        files += len(tasks[number].files)
        rows += result.rows
        if progress is not None:
            progress.update(result.bytes)
            progress.set_postfix(files=files, rows=f"{rows:,}", refresh=False)

    if client is not None:
        _run_on_dask(tasks, client, done)
    else:
        for number, task in enumerate(tasks):
            done(number, run_task(task))
    return results


def _check_workers(client) -> None:
    """Fail at once, in one line, when a worker cannot import bloomskip.

    Such a worker cannot even unpickle a task: distributed drops the message and the task
    would wait forever. The probe is a builtin (``exec`` of an import), which any worker
    unpickles, so its ``ImportError`` comes back.

    Raises:
        BloomskipError: A worker lacks bloomskip (the worker is named).
    """
    answers = client.run(exec, "import bloomskip.dataset.lake_build", on_error="return")
    for worker, answer in sorted(answers.items()):
        if isinstance(answer, BaseException):
            raise BloomskipError(
                f"the Dask worker {worker} cannot run bloomskip's build "
                f"({type(answer).__name__}: {one_line(answer)}); install the same bloomskip "
                "on every worker"
            )


def _run_on_dask(tasks, client, done) -> None:
    import secrets

    from distributed import as_completed

    _check_workers(client)

    # Keys of their own: two builds sharing a client never share a task.
    build = secrets.token_hex(4)
    keys = [f"bloomskip-build-{build}-{number}" for number in range(len(tasks))]
    futures = client.map(run_task, tasks, pure=False, key=keys)
    numbers = {future.key: number for number, future in enumerate(futures)}
    try:
        for future in as_completed(futures):
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
            done(numbers[future.key], result)
    except BaseException:
        client.cancel(futures)
        raise


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
