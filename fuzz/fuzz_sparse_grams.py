"""The sparse-grams tokenizer of the ``sparse_grams`` index (C, ``TOKENIZER_SPARSE_GRAMS``).

The first three bytes choose min_ngram_length (3..12), max_ngram_length (min..min+40, at most
100) and min_cutoff_length (none, or min..max); the rest is the string. The kernel's grams must
be the plain model's (tests/foundation/sparse_grams_model.py, written from the definition), no
gram twice, every span inside the string; the granule builder over the same string must set
every bit of every gram and take every argument the tokenizer takes.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
from common import main

from bloomskip import _native, bits

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "foundation"))
from sparse_grams_model import sparse_gram_spans  # noqa: E402

#: Strings past this length are tokenized but not compared with the quadratic model.
MODEL_BYTES = 2048


def test_one_input(data: bytes) -> None:
    if len(data) < 3:
        return
    low = 3 + data[0] % 10
    high = min(100, low + data[1] % 41)
    cutoff = None if data[2] % 4 == 0 else low + data[2] % (high - low + 1)
    text = data[3:]
    parameter = bits.sparse_grams_parameter(low, high, cutoff)
    spans = _native.tokenize(text, _native.TOKENIZER_SPARSE_GRAMS, parameter)
    assert len(spans) == len(set(spans)), "a gram emitted twice"
    assert all(0 <= start < end <= len(text) for start, end in spans)
    if len(text) <= MODEL_BYTES:
        assert sorted(spans) == sparse_gram_spans(text, low, high, cutoff)
    filters = bits.text_granules([text], [0, 1], "sparse_grams", parameter, 64, 2, data[0])
    have = np.unpackbits(filters[0], bitorder="little")
    for start, end in spans[:64]:
        positions = bits.pair_positions([text[start:end]], data[0], 64 * 8, 2)
        assert have[positions].all(), (start, end)


if __name__ == "__main__":
    main(test_one_input)
