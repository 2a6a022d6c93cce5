/*
 * The tokenizers of ClickHouse's text indexes: ngrambf_v1's n-grams of n code points and
 * tokenbf_v1's SplitByNonAlpha tokens (maximal runs of ASCII alphanumerics and bytes >= 0x80).
 */
#ifndef BLOOMSKIP_TOKENIZER_H
#define BLOOMSKIP_TOKENIZER_H

#include "core.h"

/* Tokenizer kinds, exported to Python as TOKENIZER_* constants. */
enum { TOKENIZER_NGRAM, TOKENIZER_TOKEN };

/* Token bytes of SplitByNonAlpha: ASCII alphanumerics and every byte >= 0x80. A table lookup
 * per byte instead of range comparisons; const, so the kernels' stores cannot alias it. */
static const u8 TOKEN_BYTE[256] = {
    ['0' ... '9'] = 1, ['A' ... 'Z'] = 1, ['a' ... 'z'] = 1, [0x80 ... 0xFF] = 1};

/* UTF8::seqLength of ClickHouse: the length a lead byte announces; 1 for ASCII, continuation
 * bytes and invalid leads >= 0xF8. */
static inline size_t utf8_seq_length(u8 c) {
    if (c < 0xC0 || c >= 0xF8)
        return 1;
    if (c < 0xE0)
        return 2;
    if (c < 0xF0)
        return 3;
    return 4;
}

static inline int is_token_separator(u8 c) { return !TOKEN_BYTE[c]; }

static inline int is_ascii(const u8 *s, size_t len) {
    u64 acc = 0;
    size_t i = 0;
    for (; i + 8 <= len; i += 8)
        acc |= load64(s + i);
    for (; i < len; i++)
        acc |= s[i];
    return (acc & 0x8080808080808080ULL) == 0;
}

/* Receives each token of a string: its start and length, inside the string. */
typedef void (*token_sink)(void *context, const u8 *token, size_t length);

/* Pass every token of s[0:len] to sink, in order, as ClickHouse's forEachTokenToBloomFilter
 * does. n: the n-gram size (TOKENIZER_NGRAM), at least 1. Static inline, so that a caller's
 * sink is called directly. */
static inline void for_each_token(const u8 *s, size_t len, int tokenizer, size_t n, token_sink sink,
                                  void *context) {
    if (tokenizer == TOKENIZER_NGRAM) {
        /* n-grams of n code points; the last window may be clipped at the end of the string. */
        if (len < n)
            return;
        if (is_ascii(s, len)) {
            /* Every code point is one byte: the n-grams are the byte windows. */
            for (size_t pos = 0; pos + n <= len; pos++)
                sink(context, s + pos, n);
            return;
        }
        size_t pos = 0;
        while (pos < len) {
            size_t start = pos, tlen = 0, cps = 0;
            for (; cps < n && start + tlen < len; cps++)
                tlen += utf8_seq_length(s[start + tlen]);
            if (tlen > len - start)
                tlen = len - start;
            pos += utf8_seq_length(s[pos]);
            if (cps != n)
                break;
            sink(context, s + start, tlen);
        }
        return;
    }
    size_t i = 0;
    while (i < len) {
        while (i < len && is_token_separator(s[i]))
            i++;
        size_t start = i;
        while (i < len && !is_token_separator(s[i]))
            i++;
        if (i > start)
            sink(context, s + start, i - start);
    }
}

PyObject *py_tokenize(PyObject *self, PyObject *args);

#endif
