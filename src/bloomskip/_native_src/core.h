/*
 * Shared by every unit of bloomskip._native: fixed-width types, unaligned little-endian loads,
 * the 64-bit finalizer, exact division-free remainders and single-bit access.
 *
 * Everything here is static inline: the kernels call these per item and per hash function, and
 * the split into units must not turn them into calls.
 */
#ifndef BLOOMSKIP_CORE_H
#define BLOOMSKIP_CORE_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

typedef uint64_t u64;
typedef uint32_t u32;
typedef uint8_t u8;
typedef unsigned __int128 u128;

static inline u64 load64(const u8 *p) {
    u64 v;
    memcpy(&v, p, 8);
    return v; /* little-endian hosts only; checked at import */
}

static inline u32 load32(const u8 *p) {
    u32 v;
    memcpy(&v, p, 4);
    return v;
}

static inline u64 rotl64(u64 x, int r) { return (x << r) | (x >> (64 - r)); }

static inline u64 fmix64(u64 k) {
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdULL;
    k ^= k >> 33;
    k *= 0xc4ceb9fe1a85ec53ULL;
    k ^= k >> 33;
    return k;
}

/* Exact x mod d for any 64-bit x, with a multiply instead of a division (Granlund-Montgomery
 * round-up method). Building a filter takes k remainders per item, and a hardware 64-bit division
 * costs several times the rest of the per-item work. */
typedef struct {
    u64 d;
    u64 magic;
    int shift;
    int kind; /* 0: power of two, 1: magic multiply, 2: plain division (d > 2^63) */
} fastmod_t;

static inline fastmod_t fastmod_init(u64 d) {
    fastmod_t f;
    f.d = d;
    f.magic = 0;
    f.shift = 0;
    if ((d & (d - 1)) == 0) {
        f.kind = 0;
        return f;
    }
    if (d > (1ULL << 63)) {
        f.kind = 2;
        return f;
    }
    int l = 64 - __builtin_clzll(d - 1); /* ceil(log2 d), 2..63 */
    u128 m = (((u128)1) << (64 + l)) / d;
    f.magic = (u64)(m - (((u128)1) << 64) + 1);
    f.shift = l - 1;
    f.kind = 1;
    return f;
}

static inline u64 fastmod(const fastmod_t *f, u64 x) {
    switch (f->kind) {
    case 0:
        return x & (f->d - 1);
    case 1: {
        u64 t = (u64)(((u128)f->magic * x) >> 64);
        u64 q = (t + ((x - t) >> 1)) >> f->shift;
        return x - q * f->d;
    }
    default:
        return x % f->d;
    }
}

static inline int64_t load_i64(const u8 *p) {
    int64_t v;
    memcpy(&v, p, 8);
    return v;
}

static inline int64_t load_i32(const u8 *p) {
    int32_t v;
    memcpy(&v, p, 4);
    return v;
}

static inline void bit_set(u8 *bits, u64 p) { bits[p >> 3] |= (u8)(1u << (p & 7)); }

/* A position past the end of a shorter buffer reads as 0: TsFile omits trailing zero bytes. */
static inline int bit_get(const u8 *bits, Py_ssize_t nbytes, u64 p) {
    return (p >> 3) < (u64)nbytes && ((bits[p >> 3] >> (p & 7)) & 1);
}

#endif
