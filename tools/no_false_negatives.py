"""Probe the no-false-negative property at scale: every inserted value is found again.

Outside CI (it takes minutes). It builds indexes with the project's own builders, granule after
granule, from random values, then asks for every inserted value whether the granule that holds it
may match:

* ``bloom_filter`` (UInt64 and String columns), ``tokenbf_v1`` and ``ngrambf_v1``:
  :meth:`SkipIndex.build` writes the granules; every value (its hash, each of its tokens, each of
  its n-grams) is probed in its own granule's filter with :mod:`bloomskip.bits`, and a sample of
  values per batch goes through the whole predicate path (:func:`compile_condition` and
  :meth:`IndexCondition.may_match`) as ``col = value`` / ``hasToken`` / ``LIKE``, over the plain
  granules and over the same granules bit-sliced as a segment stores them
  (:mod:`bloomskip.dataset.index.sliced`).
* the TsFile filter: :class:`bloomskip.tsfile.filter.BloomFilter` sized as the TsFile writer sizes
  it, every path added, then queried in both hash variants.

Small filters (high false-positive rates) are mixed with ClickHouse's defaults, so collisions
are common. Any value not found is a false negative: the script prints it and exits 1.

Usage::

    python tools/no_false_negatives.py [--values 500000000] [--seed 0]

Prints one line per index kind (inserted values, probes, false negatives, seconds) and a total.
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np
import pyarrow as pa

from bloomskip import bits
from bloomskip.clickhouse.condition import compile_condition
from bloomskip.clickhouse.ddl import parse_index_definition
from bloomskip.clickhouse.index import SkipIndex
from bloomskip.clickhouse.types import value_hashes
from bloomskip.dataset.index.sliced import encode_part, read_part_header
from bloomskip.dataset.index.sliced import may_match as sliced_may_match
from bloomskip.tsfile.filter import BloomFilter

#: Share of the values each kind gets.
SHARES = {
    "bloom_filter UInt64": 0.25,
    "bloom_filter String": 0.15,
    "tokenbf_v1": 0.2,
    "ngrambf_v1": 0.15,
    "tsfile": 0.25,
}
ROWS_PER_GRANULE = 8192
GRANULES_PER_BATCH = 16
#: Predicates per batch that go through compile_condition / may_match.
SAMPLED_PREDICATES = 8
_ALPHABET = np.frombuffer(b"abcdefghijklmnopqrstuvwxyz0123456789", np.uint8)
_SEPARATORS = np.frombuffer(b" ,.-_/:", np.uint8)


class FalseNegative(AssertionError):
    """A value that was inserted and is not found."""


def _quote(value: bytes) -> str:
    text = value.decode("utf-8")
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _words(rng: np.random.Generator, count: int, vocabulary: int) -> list[bytes]:
    """``count`` distinct lowercase alphanumeric words of 1..12 bytes."""
    words: set[bytes] = set()
    while len(words) < vocabulary:
        lengths = rng.integers(1, 13, count)
        letters = _ALPHABET[rng.integers(0, len(_ALPHABET), int(lengths.sum()))].tobytes()
        cuts = np.concatenate(([0], np.cumsum(lengths)))
        words.update(letters[a:b] for a, b in zip(cuts[:-1], cuts[1:], strict=True))
    return sorted(words)[:vocabulary]


def _build(definition, column: pa.Array, column_type: str) -> SkipIndex:
    granules = [ROWS_PER_GRANULE] * GRANULES_PER_BATCH
    return SkipIndex.build(definition, pa.table({"v": column}), granules, {"v": column_type})


def _granule_bits(index: SkipIndex, granule: int) -> np.ndarray:
    flat, offsets = index.column_filters(0)
    return flat[offsets[granule] : offsets[granule + 1]]


def _check_predicates(index, definition, column_type, predicates) -> int:
    """Run a sample of (granule, predicate) through the predicate path, over the plain granules
    and over the same granules bit-sliced as a segment stores them; each must keep it."""
    part = encode_part(index.granules)
    header = read_part_header(part)

    def read_ranges(ranges):
        return [part[start : start + length] for start, length in ranges]

    for granule, where in predicates:
        condition = compile_condition(where, definition, {"v": column_type})
        if not condition.may_match(index)[granule]:
            raise FalseNegative(f"{definition.type}: granule {granule} skipped for {where}")
        if not sliced_may_match(condition, header, read_ranges)[granule]:
            raise FalseNegative(
                f"{definition.type}: granule {granule} skipped for {where} (sliced part)"
            )
    return len(predicates)


def bloom_filter(rng: np.random.Generator, values: int, string: bool) -> tuple[int, int]:
    """bloom_filter over UInt64 or String: every value's hash found in its granule."""
    probes = 0
    column_type = "String" if string else "UInt64"
    batch = ROWS_PER_GRANULE * GRANULES_PER_BATCH
    done = 0
    while done < values:
        rate = rng.choice([0.025, 0.1, 0.3])
        granularity = int(rng.choice([1, 2]))
        definition = parse_index_definition(
            f"v TYPE bloom_filter({rate}) GRANULARITY {granularity}"
        )
        if string:
            lengths = rng.integers(0, 20, batch)
            raw = rng.integers(0, 256, int(lengths.sum()), dtype=np.uint8).tobytes()
            offsets = np.concatenate(([0], np.cumsum(lengths))).astype(np.int32)
            column = pa.Array.from_buffers(
                pa.binary(), batch, [None, pa.py_buffer(offsets), pa.py_buffer(raw)]
            )
            # Few distinct values per granule now and then: duplicates must not lose any.
            if rng.random() < 0.3:
                column = column.take(pa.array(rng.integers(0, 64, batch)))
        else:
            high = [2**64 - 1, 1000, 2**32][int(rng.integers(0, 3))]
            column = pa.array(rng.integers(0, high, batch, dtype=np.uint64, endpoint=True))
        index = _build(definition, column, column_type)
        hashes = value_hashes(column, column_type)[0]
        span = ROWS_PER_GRANULE * granularity
        for granule in range(index.index_granule_count):
            filter_bits = _granule_bits(index, granule)
            mine = hashes[granule * span : (granule + 1) * span]
            found = bits.seeded_contains(
                filter_bits, mine, 8 * len(filter_bits), definition.hash_functions
            )
            probes += len(mine)
            if not found.all():
                bad = int(np.argmin(found))
                raise FalseNegative(f"bloom_filter {column_type}: value {bad} of granule {granule}")
        picks = rng.integers(0, batch, SAMPLED_PREDICATES)
        predicates = []
        for row in picks.tolist():
            value = column[row].as_py()
            if not string:
                predicates.append((row // span, f"v = {value}"))
            elif _plain(value):
                predicates.append((row // span, f"v = {_quote(value)}"))
        probes += _check_predicates(index, definition, column_type, predicates)
        done += batch
    return done, probes


def _plain(value: bytes) -> bool:
    """Printable ASCII: a literal the SQL parser reads back as the same bytes."""
    return value.isascii() and all(32 <= byte < 127 for byte in value)


def token_index(rng: np.random.Generator, values: int) -> tuple[int, int]:
    """tokenbf_v1: every token of every inserted string found in its granule."""
    vocabulary = _words(rng, 1 << 16, 1 << 15)
    probes = 0
    batch = ROWS_PER_GRANULE * GRANULES_PER_BATCH
    done = 0
    while done < values:
        size = int(rng.choice([64, 256, 4096]))
        k = int(rng.integers(1, 5))
        definition = parse_index_definition(f"v TYPE tokenbf_v1({size}, {k}, {done % 7})")
        positions = bits.pair_positions(vocabulary, definition.seed, 8 * size, k)
        # Each row: 1..4 vocabulary words joined by separators.
        counts = rng.integers(1, 5, batch)
        ids = rng.integers(0, len(vocabulary), int(counts.sum()))
        separators = _SEPARATORS[rng.integers(0, len(_SEPARATORS), len(ids))]
        rows, start = [], 0
        for count in counts.tolist():
            parts = [vocabulary[i] + bytes([s]) for i, s in zip(
                ids[start : start + count].tolist(), separators[start : start + count].tolist(),
                strict=True)]  # fmt: skip
            rows.append(b"".join(parts)[:-1])
            start += count
        column = pa.array(rows, pa.binary())
        index = _build(definition, column, "String")
        row_of_word = np.repeat(np.arange(batch), counts)
        for granule in range(GRANULES_PER_BATCH):
            filter_bits = _granule_bits(index, granule)
            mine = np.unique(ids[row_of_word // ROWS_PER_GRANULE == granule])
            found = bits.test_bits(filter_bits, positions[mine].reshape(-1))
            probes += len(mine)
            if not found.all():
                raise FalseNegative(f"tokenbf_v1: a token of granule {granule} is missing")
        predicates = []
        for row in rng.integers(0, batch, SAMPLED_PREDICATES).tolist():
            word = vocabulary[int(ids[int(np.searchsorted(row_of_word, row))])]
            predicates.append((row // ROWS_PER_GRANULE, f"hasToken(v, {_quote(word)})"))
            predicates.append((row // ROWS_PER_GRANULE, f"v = {_quote(rows[row])}"))
        probes += _check_predicates(index, definition, "String", predicates)
        done += batch
    return done, probes


def ngram_index(rng: np.random.Generator, values: int) -> tuple[int, int]:
    """ngrambf_v1: every n-gram of every inserted string found in its granule."""
    probes = 0
    batch = ROWS_PER_GRANULE * GRANULES_PER_BATCH
    length = 16
    done = 0
    while done < values:
        n = int(rng.integers(2, 6))
        size = int(rng.choice([64, 512, 4096]))
        k = int(rng.integers(1, 5))
        definition = parse_index_definition(f"v TYPE ngrambf_v1({n}, {size}, {k}, 3)")
        letters = _ALPHABET[rng.integers(0, 8, (batch, length))]  # 8 letters: ngrams repeat
        column = pa.array([row.tobytes() for row in letters], pa.binary())
        index = _build(definition, column, "String")
        windows = np.lib.stride_tricks.sliding_window_view(letters, n, axis=1)
        for granule in range(GRANULES_PER_BATCH):
            mine = windows[granule * ROWS_PER_GRANULE : (granule + 1) * ROWS_PER_GRANULE]
            grams = np.unique(np.ascontiguousarray(mine).reshape(-1, n).view(f"S{n}").ravel())
            positions = bits.pair_positions(pa.array(grams.tolist(), pa.binary()), 3, 8 * size, k)
            found = bits.test_bits(_granule_bits(index, granule), positions.reshape(-1))
            probes += len(grams)
            if not found.all():
                raise FalseNegative(f"ngrambf_v1: an n-gram of granule {granule} is missing")
        predicates = []
        for row in rng.integers(0, batch, SAMPLED_PREDICATES).tolist():
            text = letters[row].tobytes()
            start = int(rng.integers(0, length - n))
            needle = text[start : start + n + int(rng.integers(0, 3))]
            predicates.append((row // ROWS_PER_GRANULE, f"v LIKE {_quote(b'%' + needle + b'%')}"))
            predicates.append((row // ROWS_PER_GRANULE, f"v = {_quote(text)}"))
        probes += _check_predicates(index, definition, "String", predicates)
        done += batch
    return done, probes


def tsfile(rng: np.random.Generator, values: int) -> tuple[int, int]:
    """TsFile filter: every added series path found, in the variant it was added with."""
    probes = 0
    done = 0
    while done < values:
        count = int(rng.choice([1000, 100_000]))
        rate = float(rng.choice([0.05, 0.3]))
        devices = rng.integers(0, 1 << 30, count)
        sensors = rng.integers(0, 500, count)
        paths = pa.array([f"root.sg{d % 97}.d{d}.s{s}" for d, s in zip(
            devices.tolist(), sensors.tolist(), strict=True)])  # fmt: skip
        for variant in ("signed-tail", "unsigned-tail"):
            bloom = BloomFilter.sized(count, rate, variant=variant)
            bloom.update(paths)
            found = bloom.contains_batch(paths)
            probes += count
            if not found.all():
                raise FalseNegative(f"tsfile ({variant}): {paths[int(np.argmin(found))]}")
            # A round trip through the file's bytes finds them too, in the default variant both.
            again = BloomFilter.from_bytes(bloom.to_bytes())
            found = again.contains_batch(paths)
            probes += count
            if not found.all():
                raise FalseNegative(f"tsfile after to_bytes: {paths[int(np.argmin(found))]}")
        done += 2 * count
    return done, probes


def main(argv: list[str] | None = None) -> int:
    """Run every kind; returns 0 when no false negative was found."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--values", type=float, default=5e8, help="inserted values in total")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    rng = np.random.default_rng(args.seed)
    runs = {
        "bloom_filter UInt64": lambda n: bloom_filter(rng, n, string=False),
        "bloom_filter String": lambda n: bloom_filter(rng, n, string=True),
        "tokenbf_v1": lambda n: token_index(rng, n),
        "ngrambf_v1": lambda n: ngram_index(rng, n),
        "tsfile": lambda n: tsfile(rng, n),
    }
    total_values = total_probes = 0
    started = time.perf_counter()
    for kind, run in runs.items():
        began = time.perf_counter()
        try:
            values, probes = run(int(args.values * SHARES[kind]))
        except FalseNegative as exc:
            print(f"FALSE NEGATIVE: {exc}", flush=True)
            return 1
        total_values += values
        total_probes += probes
        print(
            f"{kind:20s} {values:>12,d} values inserted {probes:>12,d} probes "
            f"0 false negatives {time.perf_counter() - began:8.1f} s",
            flush=True,
        )
    print(
        f"{'total':20s} {total_values:>12,d} values inserted {total_probes:>12,d} probes "
        f"0 false negatives {time.perf_counter() - started:8.1f} s (seed {args.seed})",
        flush=True,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
