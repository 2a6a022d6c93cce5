"""A plain model of ClickHouse's sparse grams, written from their definition rather than from
the C kernel's hull: the oracle of the kernel's tests under the sanitizers (where chdb cannot
load) and of the fuzz target. tests/clickhouse/test_sparse_grams.py checks the kernel against
chdb itself.

Definition (``SparseGramsImpl<true>``): the string is read as code points (``UTF8::seqLength``,
clipped at the end); every window of ``min - 1`` code points is hashed with ClickHouse's
``updateWeakHash32(window, size, 0)``; the code points from window a to window b (a < b, both
included) form a sparse gram when every window strictly between them hashes lower than both
a and b, and the gram spans at most ``max`` code points (and at least ``cutoff``, when given).
"""

from __future__ import annotations


def _seq_length(byte: int) -> int:
    if byte < 0xC0 or byte >= 0xF8:
        return 1
    return 2 if byte < 0xE0 else 3 if byte < 0xF0 else 4


def _crc32c_word(value: int, word: bytes) -> int:
    """CRC32-C (reflected 0x82F63B78) over 8 bytes, no inversion: SSE4.2's crc32 of a u64."""
    for byte in word:
        value ^= byte
        for _ in range(8):
            value = (value >> 1) ^ (0x82F63B78 if value & 1 else 0)
    return value


def weak_hash(data: bytes) -> int:
    """ClickHouse's ``updateWeakHash32(data, len(data), 0)``."""
    if len(data) < 8:
        return _crc32c_word(0, data.ljust(7, b"\0") + bytes([len(data)]))
    value, position = 0, 0
    while position + 8 <= len(data):
        value = _crc32c_word(value, data[position : position + 8])
        position += 8
    tail = len(data) - position
    if tail:
        word = bytearray(data[-8:])
        word[: 8 - tail] = bytes(8 - tail)  # keep the tail only, in the high bytes
        word[0] |= tail
        value = _crc32c_word(value, bytes(word))
    return value


def sparse_gram_spans(
    data: bytes, low: int, high: int, cutoff: int | None = None
) -> list[tuple[int, int]]:
    """Every sparse gram of ``data`` as (start, end) byte offsets, sorted."""
    starts = [0]
    while starts[-1] < len(data):
        starts.append(min(len(data), starts[-1] + _seq_length(data[starts[-1]])))
    symbols = len(starts) - 1
    width = low - 1
    hashes = [weak_hash(data[starts[i] : starts[i + width]]) for i in range(symbols - width + 1)]
    spans = []
    for a in range(len(hashes)):
        inner = -1  # the highest hash strictly between a and b
        for b in range(a + 1, len(hashes)):
            length = b - a + width
            if length > high:
                break
            if inner < min(hashes[a], hashes[b]) and (cutoff is None or length >= cutoff):
                spans.append((starts[a], starts[b + width]))
            inner = max(inner, hashes[b])
    return sorted(spans)
