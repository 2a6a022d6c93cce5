"""Run one fuzz target (or all of them) for a while, and say how it went.

Usage::

    python fuzz/run.py TARGET --seconds N      # TARGET: a name below, or "all"
    python fuzz/run.py all --seconds 30 --seed 1   # as CI runs it: the same mutations every time
    python fuzz/run.py --list

Seeds are made first when missing (make_seeds.py). The corpus a run grows is kept in
``fuzz/work/corpus/TARGET`` (the seeds stay as made), and an input that breaks a harness is
written to ``fuzz/findings/`` and the exit status is non-zero. One summary line per target:
executions, coverage, corpus size, findings.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import time
from pathlib import Path

FUZZ_DIR = Path(__file__).resolve().parent
TARGETS = {
    "tsfile_reader": "TsFile reader (tail, metadata, index, lookups)",
    "tsfile_filter": "TsFile Bloom filter bytes",
    "ch_blocks": "ClickHouse compressed blocks (.bin/.idx/.cmrk* framing)",
    "ch_marks": "ClickHouse marks (.mrk..mrk4, .cmrk*)",
    "ch_packed": "skp_idx.packed archive",
    "ch_granules": ".idx granules of bloom_filter / ngrambf_v1 / tokenbf_v1",
    "ch_part": "whole MergeTree parts, one file replaced",
    "sidecar": "the sidecar index file",
    "manifest": "a manifest version of the segmented index (record or whole manifest)",
    "segment": "a format-2 segment's file directory and bit-sliced index parts",
    "parquet_filter": "a Parquet split-block Bloom filter (Thrift header and bitset)",
    "sparse_grams": "the sparse_grams index's tokenizer and granule builder (C)",
    "parquet_granules": "a segment's plain part of parquet_bloom_filter granules",
}
#: libFuzzer's own guards: a slow input is a hang, and the whole process has a memory ceiling
#: (each harness also bounds the peak growth of a single input to 64 MB).
LIBFUZZER_FLAGS = ["-timeout=20", "-rss_limit_mb=2048", "-print_final_stats=1"]
_STATS = re.compile(r"stat::(\w+):\s*(\d+)")
_COVERAGE = re.compile(r"cov: (\d+) ft: (\d+) corp: (\d+)")


def run_target(target: str, seconds: int, seed: int = 0) -> tuple[int, dict[str, int]]:
    """Fuzz one target for ``seconds``; returns (libFuzzer's exit status, its final stats).

    ``seed`` 0 lets libFuzzer pick a random one (exploration); any other value repeats the same
    sequence of mutations, so that a CI run fails only on a regression, not on the luck of a
    draw (only the number of executions in the time differs between runs).
    """
    corpus = FUZZ_DIR / "work" / "corpus" / target
    corpus.mkdir(parents=True, exist_ok=True)
    findings = FUZZ_DIR / "findings"
    findings.mkdir(exist_ok=True)
    command = [
        sys.executable,
        str(FUZZ_DIR / f"fuzz_{target}.py"),
        str(corpus),
        str(FUZZ_DIR / "corpus" / target),
        f"-max_total_time={seconds}",
        f"-artifact_prefix={findings}/{target}-",
        f"-seed={seed}",
        *LIBFUZZER_FLAGS,
    ]
    log = FUZZ_DIR / "work" / f"{target}.log"
    with log.open("w") as output:
        status = subprocess.run(command, stdout=output, stderr=subprocess.STDOUT).returncode
    text = log.read_text(errors="replace")
    stats = {name: int(value) for name, value in _STATS.findall(text)}
    coverage = _COVERAGE.findall(text)
    if coverage:
        stats["cov"], stats["ft"], stats["corpus"] = (int(v) for v in coverage[-1])
    if status:
        sys.stdout.write(text[-4000:])
    return status, stats


def main(argv: list[str] | None = None) -> int:
    """Run the targets asked for; returns 0 when none found anything."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("target", nargs="?", choices=[*TARGETS, "all"])
    parser.add_argument("--seconds", type=int, default=30, help="time per target (default 30)")
    parser.add_argument(
        "--seed", type=int, default=0, help="libFuzzer's seed (default 0: a random one)"
    )
    parser.add_argument("--list", action="store_true", help="list the targets")
    args = parser.parse_args(argv)
    if args.list or not args.target:
        for name, what in TARGETS.items():
            print(f"{name:14s} {what}")
        return 0
    if not (FUZZ_DIR / "work" / "done").exists():
        subprocess.run([sys.executable, str(FUZZ_DIR / "make_seeds.py")], check=True)
    failed = 0
    for target in TARGETS if args.target == "all" else [args.target]:
        began = time.monotonic()
        status, stats = run_target(target, args.seconds, args.seed)
        failed |= status != 0
        print(
            f"{target:14s} {stats.get('number_of_executed_units', 0):>10,d} executions "
            f"in {time.monotonic() - began:6.1f} s, cov {stats.get('cov', 0)}, "
            f"corpus {stats.get('corpus', 0)}, peak RSS {stats.get('peak_rss_mb', 0)} MB: "
            + ("FINDING (see fuzz/findings/)" if status else "no finding"),
            flush=True,
        )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
