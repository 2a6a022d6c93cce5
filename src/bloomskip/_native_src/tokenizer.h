/*
 * The tokenizers of ClickHouse's text indexes: ngrambf_v1's n-grams of n code points,
 * tokenbf_v1's SplitByNonAlpha tokens (maximal runs of ASCII alphanumerics and bytes >= 0x80)
 * and sparse_grams' sparse grams (SparseGramsImpl<true>, the SQL function sparseGramsUTF8).
 */
#ifndef BLOOMSKIP_TOKENIZER_H
#define BLOOMSKIP_TOKENIZER_H

#include "core.h"

/* Tokenizer kinds, exported to Python as TOKENIZER_* constants. */
enum { TOKENIZER_NGRAM, TOKENIZER_TOKEN, TOKENIZER_SPARSE_GRAMS };

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

/* ---- sparse grams --------------------------------------------------------------------------
 * The parameters travel as one integer n (the n of for_each_token): min_ngram_length in bits
 * 0..15, max_ngram_length in 16..31, min_cutoff_length in 32..47 (0: none). ClickHouse accepts
 * 3 <= min <= max <= 100 and, when given, min <= cutoff <= max. */
#define SPARSE_GRAMS_MAX_LENGTH 100

static inline size_t sparse_min(size_t n) { return n & 0xFFFF; }
static inline size_t sparse_max(size_t n) { return (n >> 16) & 0xFFFF; }
static inline size_t sparse_cutoff(size_t n) { return (n >> 32) & 0xFFFF; }

static inline int sparse_params_valid(size_t n) {
    size_t lo = sparse_min(n), hi = sparse_max(n), cut = sparse_cutoff(n);
    return (n >> 48) == 0 && lo >= 3 && lo <= hi && hi <= SPARSE_GRAMS_MAX_LENGTH &&
           (cut == 0 || (cut >= lo && cut <= hi));
}

/* CRC32-C (reflected 0x82F63B78) of one little-endian 64-bit word, no pre- or post-inversion:
 * the SSE4.2 crc32 instruction (_mm_crc32_u64) ClickHouse's intHashCRC32 executes. A nibble
 * table where the instruction is missing; both give the same value. */
static const u32 CRC32C_NIBBLE[16] = {
    0x00000000, 0x105EC76F, 0x20BD8EDE, 0x30E349B1, 0x417B1DBC, 0x5125DAD3, 0x61C69362, 0x7198540D,
    0x82F63B78, 0x92A8FC17, 0xA24BB5A6, 0xB21572C9, 0xC38D26C4, 0xD3D3E1AB, 0xE330A81A, 0xF36E6F75};

static inline u32 crc32c_word_portable(u32 crc, u64 word) {
    u64 c = crc ^ word;
    for (int i = 0; i < 16; i++)
        c = (c >> 4) ^ CRC32C_NIBBLE[c & 15];
    return (u32)c;
}

/* The instruction itself, written as assembly so that it inlines into code built for any x86-64
 * (the assembler takes it whatever the compiler targets); run only where the CPU has SSE4.2. */
#if defined(__x86_64__)
static inline u32 crc32c_word_sse42(u32 crc, u64 word) {
    u64 value = crc;
    __asm__("crc32q %1, %0" : "+r"(value) : "rm"(word));
    return (u32)value;
}
#endif

static inline u32 crc32c_word(u32 crc, u64 word, int hw) {
#if defined(__x86_64__)
    if (hw)
        return crc32c_word_sse42(crc, word);
#endif
    return crc32c_word_portable(crc, word);
}

/* The weak hash of the sparse-gram windows: ClickHouse's updateWeakHash32(data, size, 0). A
 * string shorter than 8 bytes is one word with its length in the top byte; a longer one is its
 * 8-byte words and, for a tail, the last 8 bytes with all but the tail zeroed and the tail's
 * length in the low byte. avail: the bytes readable from p (at least size), so that a short
 * window is one load when 8 bytes are there. */
static inline u32 sparse_window_hash(const u8 *p, size_t size, size_t avail, int hw) {
    if (size < 8) {
        u64 value = 0;
        if (avail >= 8)
            value = load64(p) & ((1ULL << (8 * size)) - 1);
        else
            memcpy(&value, p, size);
        return crc32c_word(0, value | (u64)size << 56, hw);
    }
    u32 crc = 0;
    const u8 *end = p + size;
    for (; p + 8 <= end; p += 8)
        crc = crc32c_word(crc, load64(p), hw);
    if (p < end) {
        size_t tail = (size_t)(end - p);
        u64 word = load64(end - 8);
        word &= ~0ULL << (8 * (8 - tail));
        crc = crc32c_word(crc, word | tail, hw);
    }
    return crc;
}

/* Set by the entry points on the packed parameters (above the lengths, after they were checked)
 * when the crc32 instruction may be used: the CPU has SSE4.2 and BLOOMSKIP_NO_SIMD is not set
 * (which lets the tests run the table on such a CPU too). Read with the GIL held, once per call. */
#define SPARSE_GRAMS_HW (1ULL << 48)

static inline size_t sparse_params_for_cpu(size_t params) {
#if defined(__x86_64__)
    const char *off = getenv("BLOOMSKIP_NO_SIMD");
    if (off && *off)
        return params;
    __builtin_cpu_init();
    if (__builtin_cpu_supports("sse4.2"))
        return params | SPARSE_GRAMS_HW;
#endif
    return params;
}

/* The next symbol's offset: one code point (UTF8::seqLength, clipped at the end). */
static inline size_t sparse_next(const u8 *s, size_t len, size_t at) {
    size_t next = at + utf8_seq_length(s[at]);
    return next < len ? next : len;
}

/* A window on the hull: where it starts, the symbol index of its last symbol, its hash. */
typedef struct {
    size_t start;
    size_t symbol;
    u32 hash;
} sparse_window;

/* The hull never needs more windows than this: with that many, the oldest spans more than
 * SPARSE_GRAMS_MAX_LENGTH symbols up to the current one and can never be emitted again. */
#define SPARSE_HULL 128

/* Pass every sparse gram of s[0:len] to sink in ClickHouse's order (SparseGramsImpl<true>):
 * windows of min-1 code points are hashed; the gram from window a to window b (both included)
 * is emitted when every window strictly between them hashes lower than both, it spans at most
 * max code points, and (with a cutoff) at least cutoff. Each window is compared with the hull
 * of earlier windows whose hashes decrease, so the work is linear in the string. */
static inline void for_each_sparse_gram(const u8 *s, size_t len, size_t params, token_sink sink,
                                        void *context) {
    const size_t lo = sparse_min(params), hi = sparse_max(params), cut = sparse_cutoff(params);
    const size_t width = lo - 1; /* symbols per window */
    const int hw = (params & SPARSE_GRAMS_HW) != 0;
    sparse_window hull[SPARSE_HULL]; /* a ring: hull[(first + i) % SPARSE_HULL] */
    size_t first = 0, count = 0;
    size_t left = 0, right = 0, symbol = 0;
    /* The first window's first width-1 symbols. */
    for (size_t i = 0; i + 2 < lo; i++) {
        if (right >= len)
            return;
        right = sparse_next(s, len, right);
        if (++symbol >= width)
            left = sparse_next(s, len, left);
    }
    while (right < len) {
        size_t end = sparse_next(s, len, right);
        u32 hash = sparse_window_hash(s + left, end - left, len - left, hw);
        /* Windows hashing lower than this one end their grams here. */
        while (count) {
            sparse_window *back = &hull[(first + count - 1) % SPARSE_HULL];
            if (back->hash >= hash)
                break;
            size_t length = symbol - back->symbol + width;
            if (length > hi) {
                count = 0; /* older windows are farther still */
                break;
            }
            if (!cut || length >= cut)
                sink(context, s + back->start, end - back->start);
            count--;
        }
        if (count) {
            /* The nearest window hashing at least as high also ends a gram here. */
            sparse_window *back = &hull[(first + count - 1) % SPARSE_HULL];
            size_t length = symbol - back->symbol + width;
            if (length <= hi && (!cut || length >= cut))
                sink(context, s + back->start, end - back->start);
        }
        while (count && hull[(first + count - 1) % SPARSE_HULL].hash == hash)
            count--;
        if (count == SPARSE_HULL) {
            first = (first + 1) % SPARSE_HULL;
            count--;
        }
        hull[(first + count) % SPARSE_HULL] = (sparse_window){left, symbol, hash};
        count++;
        right = end;
        if (++symbol >= width)
            left = sparse_next(s, len, left);
    }
}

/* Pass every token of s[0:len] to sink, in order, as ClickHouse's forEachTokenToBloomFilter
 * does. n: the n-gram size (TOKENIZER_NGRAM), at least 1, or the packed sparse-gram
 * parameters (TOKENIZER_SPARSE_GRAMS, see sparse_params_valid). Static inline, so that a caller's
 * sink is called directly. */
static inline void for_each_token(const u8 *s, size_t len, int tokenizer, size_t n, token_sink sink,
                                  void *context) {
    if (tokenizer == TOKENIZER_SPARSE_GRAMS) {
        for_each_sparse_gram(s, len, n, sink, context);
        return;
    }
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
