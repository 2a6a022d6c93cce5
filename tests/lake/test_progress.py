"""Progress bars: a build's counts the bytes of the files it reads, in that one unit from start to
end, and advances within a task; a long query's counts the rows it reads, for a folder read by
DuckDB and for a lake on an object store read through pyarrow; neither writes anything when
stderr is not a terminal."""

from __future__ import annotations

import csv
import fcntl
import os
import pty
import re
import select
import struct
import subprocess
import sys
import termios

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from lake_fixtures import upload
from tqdm import tqdm

from bloomskip import Dataset
from bloomskip.cli import main
from bloomskip.dataset.scan import query as scan

# bloomskip in a child process, where tqdm draws every update (its own defaults, which it reads
# from the environment as it is imported) and a query's bar is shown from its start (a real
# one waits a second first, and only for a read of millions of rows): what the bars draw does
# not depend on the machine's speed.
BLOOMSKIP = (
    "from bloomskip.dataset.scan import query; query.PROGRESS_DELAY = 0; "
    "query.PROGRESS_MIN_ROWS = 0; "
    "from bloomskip.cli import main; main()"
)
EVERY_UPDATE = {"TQDM_MININTERVAL": "0", "TQDM_MINITERS": "1"}


def _bloomskip(argv: list[str], stderr=subprocess.PIPE) -> tuple[int, str]:
    done = subprocess.run(
        [sys.executable, "-c", BLOOMSKIP, *argv],
        stdout=subprocess.DEVNULL,
        stderr=stderr,
        env={**os.environ, **EVERY_UPDATE},
        text=True,
        timeout=300,
    )
    return done.returncode, done.stderr


def _frames(err: str, description: str) -> list[str]:
    return [frame for frame in re.split(r"[\r\n]", err) if frame.startswith(f"{description}:")]


def _percents(frames: list[str]) -> list[int]:
    return [int(re.match(r"\w+: *(\d+)%", frame).group(1)) for frame in frames]


@pytest.fixture
def one_file(tmp_path):
    """One file of 40 row groups: a build of it is one task."""
    directory = tmp_path / "one"
    directory.mkdir()
    ids = np.arange(400_000, dtype=np.int64)
    pq.write_table(pa.table({"id": ids}), directory / "only.parquet", row_group_size=10_000)
    return directory


@pytest.fixture
def many_files(tmp_path):
    """30 files of 4 row groups: 120 row groups, more than a query reads in one step."""
    directory = tmp_path / "many"
    directory.mkdir()
    for number in range(30):
        ids = np.arange(number * 4_000, (number + 1) * 4_000, dtype=np.int64)
        table = pa.table({"id": ids, "v": ids % 7})
        pq.write_table(table, directory / f"part-{number:02}.parquet", row_group_size=1_000)
    return directory


def test_a_build_counts_bytes_from_start_to_end_and_advances_within_its_one_task(
    one_file, tmp_path
) -> None:
    index = str(tmp_path / "index")
    argv = ["index", "build", str(one_file), "--index-location", index, "--progress"]
    status, err = _bloomskip([*argv, "--index", "id TYPE bloom_filter"])
    assert status == 0, err
    assert len(Dataset(str(one_file), index_location=index).status()["segments"]) == 1  # a task
    frames = _frames(err, "indexing")
    # Every frame counts bytes, from the first: of the file's size, at a rate in B/s.
    size = tqdm.format_sizeof((one_file / "only.parquet").stat().st_size, divisor=1024)
    assert all(f"/{size} [" in frame and re.search(r"B/s[,\]]", frame) for frame in frames)
    assert not any("rows/s" in frame for frame in frames), frames
    percents = _percents(frames)
    assert percents == sorted(percents) and percents[0] == 0 and percents[-1] == 100
    # The one task's row groups advance the bar as they are read, not all at its end.
    assert len({percent for percent in percents if 0 < percent < 100}) >= 10, percents


def test_nothing_is_drawn_when_stderr_is_not_a_terminal(
    many_files, tmp_path, capsys, monkeypatch
) -> None:
    monkeypatch.setattr(scan, "PROGRESS_DELAY", 0)
    index = ["--index-location", str(tmp_path / "index")]
    assert main(["index", "build", str(many_files), *index, "--index", "id TYPE bloom_filter"]) == 0
    assert main(["query", str(many_files), *index, "--where", "v = 3", "--format", "csv"]) == 0
    captured = capsys.readouterr()
    assert captured.err == ""  # stderr is captured here: not a terminal
    # The build's summary, the CSV header and the rows.
    assert len(captured.out.splitlines()) == 2 + len(range(3, 120_000, 7))
    # Asked for, the same commands draw their bars.
    assert main(["index", "build", str(many_files), *index, "--progress"]) == 0
    query = ["query", str(many_files), *index, "--where", "v = 3", "--progress"]
    assert main([*query, "--format", "csv", "--output", str(tmp_path / "rows.csv")]) == 0
    err = capsys.readouterr().err
    assert _frames(err, "indexing") and _frames(err, "querying")


def _ids(path) -> list[int]:
    with open(path, newline="") as handle:
        return sorted(int(row["id"]) for row in csv.DictReader(handle))


@pytest.mark.parametrize("where", ["folder", "s3"])
def test_a_long_query_counts_the_rows_it_reads(where, many_files, tmp_path, request) -> None:
    location = str(many_files)
    if where == "s3":  # read through pyarrow, each step's footers fetched as the step starts
        location = f"s3://{request.getfixturevalue('bucket')}/many"
        upload(many_files, location)
    index = ["--index-location", str(tmp_path / "index")]
    assert main(["index", "build", location, *index, "--index", "id TYPE bloom_filter"]) == 0
    query = ["query", location, *index, "--where", "v = 3", "--select", "id", "--progress"]
    output = tmp_path / "rows.csv"
    status, err = _bloomskip([*query, "--format", "csv", "--output", str(output)])
    assert status == 0, err
    assert _ids(output) == list(range(3, 120_000, 7))
    frames = _frames(err, "querying")
    assert all(re.search(r" rows/s\]\s*$", frame) for frame in frames), frames
    percents = _percents(frames)
    assert percents == sorted(percents) and percents[0] == 0 and percents[-1] == 100
    assert len(set(percents)) >= 10, percents  # steps of a few files each, one after another
    # With a LIMIT, no step starts once it is reached; the rows are still matching ones.
    status, err = _bloomskip([*query, "--limit", "10", "--format", "csv", "--output", str(output)])
    assert status == 0, err
    limited = _ids(output)
    assert len(limited) == 10 and all(number % 7 == 3 for number in limited)
    assert _percents(_frames(err, "querying"))[-1] < 100


def _on_a_terminal(argv: list[str]) -> tuple[int, str]:
    """Run bloomskip with its stderr on a pseudo-terminal; return its status and what it drew
    there."""
    leader, follower = pty.openpty()
    # A terminal of 160 columns: tqdm draws nothing on one of none, a new pty's size.
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 160, 0, 0))
    child = subprocess.Popen(
        [sys.executable, "-c", BLOOMSKIP, *argv],
        stdout=subprocess.DEVNULL,
        stderr=follower,
        env={**os.environ, **EVERY_UPDATE},
    )
    os.close(follower)
    drawn = b""
    while select.select([leader], [], [], 300)[0]:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # the child ended: the terminal is closed
            break
        if not chunk:
            break
        drawn += chunk
    os.close(leader)
    return child.wait(60), drawn.decode()


def test_on_a_terminal_build_and_query_draw_their_bars_unasked(many_files, tmp_path) -> None:
    index = ["--index-location", str(tmp_path / "index")]
    status, drawn = _on_a_terminal(
        ["index", "build", str(many_files), *index, "--index", "id TYPE bloom_filter"]
    )
    frames = _frames(drawn, "indexing")
    assert status == 0 and frames and all("B/s" in frame for frame in frames), drawn
    query = ["query", str(many_files), *index, "--where", "v = 3", "--format", "csv"]
    status, drawn = _on_a_terminal(query)
    assert status == 0 and _frames(drawn, "querying"), drawn
