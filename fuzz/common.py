"""What every harness shares: instrumented imports, the exception rule and the memory bound.

A harness calls :func:`main` with its ``test_one_input(data)``. Each input must either succeed
(and then pass the harness's own oracle) or raise a :class:`bloomskip.errors.BloomskipError`;
any other exception is a finding, and so is an input whose peak resident memory grows by more
than :data:`PEAK_GROWTH` (a decompression bomb, an allocation sized by a corrupt field).
"""

from __future__ import annotations

import contextlib
import re
import sys
from collections.abc import Callable
from pathlib import Path

import atheris

FUZZ_DIR = Path(__file__).resolve().parent
#: Where make_seeds.py writes the corpora (one folder per target) and the templates they need.
CORPUS_DIR = FUZZ_DIR / "corpus"
WORK_DIR = FUZZ_DIR / "work"
#: The most an input of under 1 MB may add to the process's peak RSS.
PEAK_GROWTH = 64 << 20

_HWM = re.compile(rb"VmHWM:\s+(\d+) kB")

with atheris.instrument_imports(include=["bloomskip"]):
    import bloomskip.clickhouse.compression  # noqa: F401
    import bloomskip.clickhouse.index  # noqa: F401
    import bloomskip.clickhouse.marks  # noqa: F401
    import bloomskip.clickhouse.part  # noqa: F401
    import bloomskip.clickhouse.part_cli  # noqa: F401
    import bloomskip.dataset.index.plain_part  # noqa: F401
    import bloomskip.dataset.index.segments  # noqa: F401
    import bloomskip.dataset.index.sidecar  # noqa: F401
    import bloomskip.dataset.index.sliced  # noqa: F401
    import bloomskip.tsfile.filter  # noqa: F401
    import bloomskip.tsfile.reader  # noqa: F401
    from bloomskip.errors import BloomskipError


def peak_rss() -> int:
    """The process's peak resident set so far (VmHWM), in bytes; 0 where /proc is missing."""
    try:
        with open("/proc/self/status", "rb") as status:
            match = _HWM.search(status.read())
    except OSError:
        return 0
    return int(match.group(1)) * 1024 if match else 0


def bounded(test_one_input: Callable[[bytes], None]) -> Callable[[bytes], None]:
    """Wrap a harness: BloomskipError is an answer, any other exception or a memory peak is not."""

    def run(data: bytes) -> None:
        before = peak_rss()
        with contextlib.suppress(BloomskipError):
            test_one_input(data)
        grown = peak_rss() - before
        if grown > PEAK_GROWTH:
            raise AssertionError(f"an input of {len(data)} bytes raised the peak RSS by {grown}")

    return run


def main(test_one_input: Callable[[bytes], None]) -> None:
    """Run libFuzzer on the harness (arguments as libFuzzer takes them; see run.py)."""
    atheris.Setup(sys.argv, bounded(test_one_input))
    atheris.Fuzz()


def require_work(name: str) -> Path:
    """A template folder made by make_seeds.py (exits with a hint when it is missing)."""
    path = WORK_DIR / name
    if not path.exists():
        sys.exit(f"{path} is missing: run python fuzz/make_seeds.py first")
    return path


def reseal_blocks(data: bytes) -> bytes:
    """Give every whole compressed block of ``data`` the checksum clickhouse-cityhash computes.

    Without it, nearly every mutation of a block fails its checksum and the decoders behind it
    are never reached; harnesses reseal when the input's flag byte asks for it.
    """
    from clickhouse_cityhash.cityhash import CityHash128

    out = bytearray(data)
    offset = 0
    while offset + 25 <= len(out):
        size = int.from_bytes(out[offset + 17 : offset + 21], "little")
        end = offset + 16 + size
        if size < 9 or end > len(out):
            break
        value = CityHash128(bytes(out[offset + 16 : end]))
        out[offset : offset + 8] = (value >> 64).to_bytes(8, "little")
        out[offset + 8 : offset + 16] = (value & (2**64 - 1)).to_bytes(8, "little")
        offset = end
    return bytes(out)


def selector(data: bytes, count: int) -> tuple[int, bytes]:
    """Split an input into a choice among ``count`` things (its first byte) and the rest."""
    if not data:
        return 0, b""
    return data[0] % count, data[1:]
