"""``TextGranules.token_sets_present`` for one token list (a LIKE's n-grams, a hasToken), which
probes token by token over the filters still holding every token before it, against a reading
of each granule's filter bit by bit.

The reference takes the bit positions ClickHouse's scheme gives each token
(``bits.pair_positions``, checked against ClickHouse's own filters in test_index_build.py) and
reads those bits of every granule's filter with numpy.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from bloomskip import bits
from bloomskip.clickhouse import granule as granule_module
from bloomskip.clickhouse.ddl import parse_index_definition
from bloomskip.clickhouse.index import SkipIndex
from bloomskip.clickhouse.tokenizers import QueryTokenizer

DEFINITION = parse_index_definition("INDEX u url TYPE ngrambf_v1(3, 256, 2, 5)")


def _urls(rows: int) -> list[str]:
    rng = np.random.default_rng(3)
    # Sorted ids: granules hold narrow ranges, so the first digits' n-grams prune.
    ids = np.sort(rng.integers(0, 1 << 24, rows))
    return [f"https://example.com/item/{value:06x}" for value in ids]


@pytest.fixture(scope="module")
def index() -> SkipIndex:
    urls = _urls(4000)
    return SkipIndex.build(DEFINITION, pa.table({"url": urls}), [50] * 80)


def _reference(index: SkipIndex, tokens: list[bytes], granules: np.ndarray) -> np.ndarray:
    filters, offsets = index.column_filters(0)
    if not tokens:
        return np.ones(len(granules), bool)
    d = DEFINITION
    positions = bits.pair_positions(tokens, d.seed, 8 * d.size_bytes, d.hash_functions)
    expected = []
    for j in granules:
        unpacked = np.unpackbits(filters[offsets[j] : offsets[j + 1]], bitorder="little")
        expected.append(bool(unpacked[positions.astype(np.int64)].all()))
    return np.array(expected)


def _needles() -> list[bytes]:
    urls = _urls(4000)
    present = [urls[i][len("https://example.com") :].encode() for i in (0, 1234, 3999)]
    return [*present, b"/item/zzzzzz", b"item/", b"", b"ab", b"/item/0a0a0a0a/item/"]


@pytest.mark.parametrize("batch", [1 << 22, 5])
def test_one_token_list_keeps_exactly_the_granules_holding_every_token(
    index, monkeypatch, batch
) -> None:
    # A small batch makes every probe span several chunks of granules.
    monkeypatch.setattr(granule_module, "_PROBE_BATCH", batch)
    tokenizer = QueryTokenizer("ngram", 3)
    everything = np.arange(len(index))
    some = np.array([79, 3, 3, 40, 0])
    pruned = 0
    lists = []
    for needle in _needles():
        tokens = tokenizer.substring_tokens(needle, False, False)
        # The whole needle, and each n-gram and pair of n-grams of it alone.
        pairs = [[a, b] for a, b in zip(tokens, tokens[1:], strict=False)]
        lists += [tokens, *([token] for token in tokens), *pairs]
    for tokens in lists:
        for granules in (everything, some):
            chosen = None if granules is everything else granules
            got = index.granules.token_sets_present(0, [tokens + tokens[:1]], chosen)
            assert got.shape == (len(granules), 1)
            assert got[:, 0].tolist() == _reference(index, tokens, granules).tolist(), tokens
        pruned += int((~_reference(index, tokens, everything)).sum())
    assert pruned > len(index)  # the needles do prune: the test compares real verdicts


def test_one_token_list_agrees_with_the_same_list_among_others(index) -> None:
    tokenizer = QueryTokenizer("ngram", 3)
    lists = [tokenizer.substring_tokens(needle, False, False) for needle in _needles()]
    together = index.granules.token_sets_present(0, lists)
    for number, tokens in enumerate(lists):
        alone = index.granules.token_sets_present(0, [tokens])
        assert alone[:, 0].tolist() == together[:, number].tolist()
