"""Throughput of bloomskip's vectorized hashes against per-item peers and numpy, in one run.

Usage: python benchmarks/hashing.py [--ints 10000000] [--strings 1000000] [--repeat 3]

Data: random uint64 values, and random strings of 10-40 bytes, half ASCII and half mixed UTF-8.
Peers: ``mmh3.hash128`` and ``clickhouse_cityhash`` ``CityHash64`` called once per item (how a
Python user hashes a batch with them), and ``intHash64`` written with numpy ufuncs. Single thread.
"""

from __future__ import annotations

import argparse
import time

import clickhouse_cityhash.cityhash as cityhash_ref
import mmh3
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from bloomskip import hashing


def make_strings(count: int, rng: np.random.Generator) -> pa.Array:
    """Random strings of 10-40 UTF-8 bytes; odd rows mix in 2- and 3-byte characters."""
    alphabet_ascii = np.frombuffer(b"abcdefghijklmnopqrstuvwxyz0123456789._-/", dtype=np.uint8)
    wide = "éßжя温度设备€"
    lengths = rng.integers(10, 41, size=count)
    offsets = np.zeros(count + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    data = alphabet_ascii[rng.integers(0, alphabet_ascii.size, size=int(offsets[-1]))]
    ascii_rows = pa.LargeStringArray.from_buffers(
        count, pa.py_buffer(offsets), pa.py_buffer(data.tobytes())
    )
    # Mixed rows: an ASCII prefix plus one multi-byte character, trimmed back into 10-40 bytes.
    picks = np.array(list(wide))[rng.integers(0, len(wide), size=count)]
    mixed = pc.binary_join_element_wise(
        pc.utf8_slice_codeunits(ascii_rows, 0, 30),
        pa.array(picks, type=pa.large_string()),
        pa.scalar("", type=pa.large_string()),
    )
    return pc.if_else(pa.array(np.arange(count) % 2 == 1), mixed, ascii_rows)


def numpy_int_hash64(x: np.ndarray) -> np.ndarray:
    """ClickHouse intHash64 (fmix64) with numpy ufuncs: the vectorized peer for integers."""
    x = x ^ (x >> np.uint64(33))
    x = x * np.uint64(0xFF51AFD7ED558CCD)
    x = x ^ (x >> np.uint64(33))
    x = x * np.uint64(0xC4CEB9FE1A85EC53)
    return x ^ (x >> np.uint64(33))


def best_time(fn, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ints", type=int, default=10_000_000)
    parser.add_argument("--strings", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    rng = np.random.default_rng(20261130)
    ints = rng.integers(0, 2**64, size=args.ints, dtype=np.uint64)
    strings = make_strings(args.strings, rng)
    as_bytes = [s.encode() for s in strings.to_pylist()]
    utf8_share = sum(1 for b in as_bytes if max(b) >= 0x80) / len(as_bytes)

    rows: list[tuple[str, str, int, float]] = []

    def run(label: str, peer_of: str, count: int, fn) -> None:
        rows.append((label, peer_of, count, best_time(fn, args.repeat)))

    run("bloomskip murmur3_x64_128", "mmh3", args.strings, lambda: hashing.murmur3_x64_128(strings))
    run("bloomskip tsfile_hash32", "mmh3", args.strings, lambda: hashing.tsfile_hash32(strings, 5))
    run("bloomskip cityhash64", "city", args.strings, lambda: hashing.cityhash64(strings))
    run(
        "bloomskip cityhash64_with_seed",
        "city",
        args.strings,
        lambda: hashing.cityhash64_with_seed(strings, 1),
    )
    run("bloomskip cityhash128", "city", args.strings, lambda: hashing.cityhash128(strings))
    run("peer mmh3.hash128 per item", "", args.strings, lambda: [mmh3.hash128(b) for b in as_bytes])
    run(
        "peer clickhouse_cityhash CityHash64 per item",
        "",
        args.strings,
        lambda: [cityhash_ref.CityHash64(b) for b in as_bytes],
    )
    run("bloomskip int_hash64", "numpy", args.ints, lambda: hashing.int_hash64(ints))
    run("peer numpy intHash64", "", args.ints, lambda: numpy_int_hash64(ints))
    assert np.array_equal(hashing.int_hash64(ints[:1000]), numpy_int_hash64(ints[:1000]))

    peers = {
        "mmh3": "peer mmh3.hash128 per item",
        "city": "peer clickhouse_cityhash CityHash64 per item",
        "numpy": "peer numpy intHash64",
    }
    seconds = {label: t for label, _, _, t in rows}
    print(
        f"{args.strings:,} strings of 10-40 bytes ({utf8_share:.0%} with UTF-8), "
        f"{args.ints:,} uint64; best of {args.repeat}, single thread"
    )
    print(f"{'function':46} {'items':>11} {'seconds':>9} {'Mitems/s':>9}  ratio vs peer")
    for label, peer_of, count, t in rows:
        ratio = f"{seconds[peers[peer_of]] / t:6.1f}x vs {peers[peer_of][5:]}" if peer_of else ""
        print(f"{label:46} {count:>11,} {t:9.4f} {count / t / 1e6:9.1f}  {ratio}")


if __name__ == "__main__":
    main()
