"""What the benchmarks share: interleaved medians, a fresh process's wall time, moto's S3 env.

The benchmarks are scripts (``python benchmarks/NAME.py``), so this module is imported by
its name from their folder.
"""

from __future__ import annotations

import statistics
import subprocess
import time
from collections.abc import Callable

#: The credentials and region a local moto S3 server takes (no real account is reached).
S3_ENV = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_REGION": "us-east-1",
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_EC2_METADATA_DISABLED": "true",
}


def median_interleaved(
    functions: dict[str, Callable[[], object]], repeat: int
) -> tuple[dict[str, float], dict]:
    """Median seconds of each function over ``repeat`` rounds, each round running all of them
    once in turn (after one warm-up round); and each one's last result.

    Example:
        >>> times, results = median_interleaved({"one": lambda: 1}, 3)
        >>> results
        {'one': 1}
    """
    results = {name: function() for name, function in functions.items()}
    times: dict[str, list[float]] = {name: [] for name in functions}
    for _ in range(repeat):
        for name, function in functions.items():
            started = time.perf_counter()
            results[name] = function()
            times[name].append(time.perf_counter() - started)
    return {name: statistics.median(values) for name, values in times.items()}, results


def fresh(command: list[str]) -> tuple[float, str]:
    """Wall seconds and standard output of ``command`` run in a new process; a failure stops
    the benchmark with its standard error."""
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode:
        raise SystemExit(f"{' '.join(command)}: {done.stderr.strip()}")
    return time.perf_counter() - started, done.stdout
