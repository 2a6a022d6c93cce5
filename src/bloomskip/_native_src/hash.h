/*
 * The hash algorithms: MurmurHash3 x64-128 and TsFile's Murmur128Hash variants, CityHash v1.0.2
 * (the version ClickHouse bundles), ClickHouse's Hash128to64 and XXH64 (Parquet's Bloom filters).
 *
 * Defined in the header, static inline, so that the kernels of every unit (batch hashes, bit
 * schemes, granule builders, the TsFile tail verdict) inline them into their per-item loops.
 * The Python entry points are in hash.c.
 */
#ifndef BLOOMSKIP_HASH_H
#define BLOOMSKIP_HASH_H

#include "core.h"

/* Kinds of hash_batch, exported to Python as HASH_* constants. */
enum { HASH_MURMUR3_128, HASH_TSFILE32, HASH_CITY64, HASH_CITY64_SEEDED, HASH_CITY128, HASH_XXH64 };

/* ------------------------------------------------------------------------------------------ */
/* MurmurHash3 x64-128 and TsFile's Murmur128Hash                                              */
/* ------------------------------------------------------------------------------------------ */

#define MM_C1 0x87c37b91114253d5ULL
#define MM_C2 0x4cf5ad432745937fULL

/* Java's tail: each byte of w sign-extended to 64 bits, shifted to its place and XORed in. A
 * byte >= 0x80 at position j flips every bit above byte j, so the correction is the prefix XOR of
 * an all-ones byte one place above each such byte. */
static inline u64 sign_extend_bytes(u64 w) {
    u64 high = (w & 0x8080808080808080ULL) >> 7; /* 0x01 in each byte whose top bit is set */
    u64 flips = (high * 0xFF) << 8;
    flips ^= flips << 8;
    flips ^= flips << 16;
    flips ^= flips << 32;
    return w ^ flips;
}

static inline void murmur3_block(const u8 *block, u64 *h1p, u64 *h2p) {
    u64 h1 = *h1p, h2 = *h2p;
    u64 k1 = load64(block), k2 = load64(block + 8);
    k1 *= MM_C1;
    k1 = rotl64(k1, 31);
    k1 *= MM_C2;
    h1 ^= k1;
    h1 = rotl64(h1, 27);
    h1 += h2;
    h1 = h1 * 5 + 0x52dce729;
    k2 *= MM_C2;
    k2 = rotl64(k2, 33);
    k2 *= MM_C1;
    h2 ^= k2;
    h2 = rotl64(h2, 31);
    h2 += h1;
    h2 = h2 * 5 + 0x38495ab5;
    *h1p = h1;
    *h2p = h2;
}

/* The tail words k1 (bytes 0..7 of the tail) and k2 (bytes 8..14). tail_mode 0: standard
 * MurmurHash3, bytes zero-extended (TsFile's C++ writer); tail_mode 1: TsFile's Java
 * Murmur128Hash, each byte sign-extended from int8 to int64 and XORed in. */
static inline void murmur3_tail(const u8 *data, size_t len, int tail_mode, u64 *k1p, u64 *k2p) {
    size_t rem = len & 15;
    u64 k1 = 0, k2 = 0;
    if (len >= 8) {
        /* Branch-free: the tail is cut out of the last 16 bytes (or, for 8..15 bytes, out of two
         * overlapping 8-byte loads) with shifts. With string lengths that vary, assembling it byte
         * by byte mispredicts on nearly every item. */
        /* For 8..15 bytes, bytes before the start read as zero; two shifts keep each below 64. */
        u64 low = len >= 16 ? load64(data + len - 16) : (load64(data) << 8) << (8 * (15 - len));
        u128 last16 = ((u128)load64(data + len - 8) << 64) | low;
        /* Two shifts keep each below 128 bits; the mask clears the rem == 0 case. */
        u128 tail = ((last16 >> 8) >> (8 * (15 - rem))) & -(u128)(rem != 0);
        k1 = (u64)tail;
        k2 = (u64)(tail >> 64);
    } else {
        for (size_t j = 0; j < rem; j++)
            k1 |= (u64)data[j] << (8 * j);
    }
    if (tail_mode) {
        k1 = sign_extend_bytes(k1);
        k2 = sign_extend_bytes(k2);
    }
    *k1p = k1;
    *k2p = k2;
}

/* Mix the tail words in and finalize. Mixing a zero word leaves h unchanged, so no branch on the
 * tail's length is needed. */
static inline void murmur3_finish(u64 h1, u64 h2, u64 k1, u64 k2, size_t len, u64 *out1, u64 *out2) {
    k2 *= MM_C2;
    k2 = rotl64(k2, 33);
    k2 *= MM_C1;
    h2 ^= k2;
    k1 *= MM_C1;
    k1 = rotl64(k1, 31);
    k1 *= MM_C2;
    h1 ^= k1;
    h1 ^= (u64)len;
    h2 ^= (u64)len;
    h1 += h2;
    h2 += h1;
    h1 = fmix64(h1);
    h2 = fmix64(h2);
    h1 += h2;
    h2 += h1;
    *out1 = h1;
    *out2 = h2;
}

static inline void murmur3_128(const u8 *data, size_t len, u64 seed, int tail_mode, u64 *out1,
                               u64 *out2) {
    u64 h1 = seed, h2 = seed, k1, k2;
    for (size_t i = 0; i < len / 16; i++)
        murmur3_block(data + 16 * i, &h1, &h2);
    murmur3_tail(data, len, tail_mode, &k1, &k2);
    murmur3_finish(h1, h2, k1, k2, len, out1, out2);
}

/* TsFile hash32: the low 32 bits of h1 + h2 as a signed int; the seed is a Java int widened to
 * long, hence sign-extended. */
static inline int32_t tsfile_hash32(const u8 *data, size_t len, int32_t seed, int signed_tail) {
    u64 h1, h2;
    murmur3_128(data, len, (u64)(int64_t)seed, signed_tail, &h1, &h2);
    return (int32_t)(u32)(h1 + h2);
}

/* TsFile bit index: abs(hash32) mod bit_count, with Integer.MIN_VALUE mapped to 0. */
static inline u64 tsfile_index(int32_t h, u64 bit_count) {
    u64 a = (h == INT32_MIN) ? 0 : (u64)(h < 0 ? -(int64_t)h : (int64_t)h);
    return a % bit_count;
}

static const int32_t TSFILE_SEEDS[8] = {5, 7, 11, 19, 31, 37, 43, 59};

/* ------------------------------------------------------------------------------------------ */
/* CityHash v1.0.2 (the version ClickHouse bundles)                                            */
/* ------------------------------------------------------------------------------------------ */

#define CH_K0 0xc3a5c85c97cb3127ULL
#define CH_K1 0xb492b66fbe98f273ULL
#define CH_K2 0x9ae16a3b2f90404fULL
#define CH_K3 0xc949d7c7509e6557ULL
#define CH_KMUL 0x9ddfea08eb382d69ULL

static inline u64 city_rotate(u64 v, int s) { return s == 0 ? v : ((v >> s) | (v << (64 - s))); }
static inline u64 city_rotate1(u64 v, int s) { return (v >> s) | (v << (64 - s)); }
static inline u64 shift_mix(u64 v) { return v ^ (v >> 47); }

static inline u64 hash128_to_64(u64 low, u64 high) {
    u64 a = (low ^ high) * CH_KMUL;
    a ^= a >> 47;
    u64 b = (high ^ a) * CH_KMUL;
    b ^= b >> 47;
    b *= CH_KMUL;
    return b;
}

static inline u64 hash_len16(u64 u, u64 v) { return hash128_to_64(u, v); }

static inline u64 hash_len0to16(const u8 *s, size_t len) {
    if (len > 8) {
        u64 a = load64(s);
        u64 b = load64(s + len - 8);
        return hash_len16(a, city_rotate1(b + len, (int)len)) ^ b;
    }
    if (len >= 4) {
        u64 a = load32(s);
        return hash_len16(len + (a << 3), load32(s + len - 4));
    }
    if (len > 0) {
        u8 a = s[0], b = s[len >> 1], c = s[len - 1];
        u32 y = (u32)a + ((u32)b << 8);
        u32 z = (u32)len + ((u32)c << 2);
        return shift_mix((u64)y * CH_K2 ^ (u64)z * CH_K3) * CH_K2;
    }
    return CH_K2;
}

static inline u64 hash_len17to32(const u8 *s, size_t len) {
    u64 a = load64(s) * CH_K1;
    u64 b = load64(s + 8);
    u64 c = load64(s + len - 8) * CH_K2;
    u64 d = load64(s + len - 16) * CH_K0;
    return hash_len16(city_rotate(a - b, 43) + city_rotate(c, 30) + d,
                      a + city_rotate(b ^ CH_K3, 20) - c + len);
}

typedef struct {
    u64 first, second;
} pair64;

static inline pair64 weak_len32_seeds6(u64 w, u64 x, u64 y, u64 z, u64 a, u64 b) {
    a += w;
    b = city_rotate(b + a + z, 21);
    u64 c = a;
    a += x;
    a += y;
    b += city_rotate(a, 44);
    pair64 r = {a + z, b + c};
    return r;
}

static inline pair64 weak_len32_seeds(const u8 *s, u64 a, u64 b) {
    return weak_len32_seeds6(load64(s), load64(s + 8), load64(s + 16), load64(s + 24), a, b);
}

static inline u64 hash_len33to64(const u8 *s, size_t len) {
    u64 z = load64(s + 24);
    u64 a = load64(s) + (len + load64(s + len - 16)) * CH_K0;
    u64 b = city_rotate(a + z, 52);
    u64 c = city_rotate(a, 37);
    a += load64(s + 8);
    c += city_rotate(a, 7);
    a += load64(s + 16);
    u64 vf = a + z;
    u64 vs = b + city_rotate(a, 31) + c;
    a = load64(s + 16) + load64(s + len - 32);
    z = load64(s + len - 8);
    b = city_rotate(a + z, 52);
    c = city_rotate(a, 37);
    a += load64(s + len - 24);
    c += city_rotate(a, 7);
    a += load64(s + len - 16);
    u64 wf = a + z;
    u64 ws = b + city_rotate(a, 31) + c;
    u64 r = shift_mix((vf + ws) * CH_K2 + (wf + vs) * CH_K0);
    return shift_mix(r * CH_K0 + vs) * CH_K2;
}

static inline u64 city_hash64(const u8 *s, size_t len) {
    if (len <= 32) {
        if (len <= 16)
            return hash_len0to16(s, len);
        return hash_len17to32(s, len);
    }
    if (len <= 64)
        return hash_len33to64(s, len);
    u64 x = load64(s);
    u64 y = load64(s + len - 16) ^ CH_K1;
    u64 z = load64(s + len - 56) ^ CH_K0;
    pair64 v = weak_len32_seeds(s + len - 64, len, y);
    pair64 w = weak_len32_seeds(s + len - 32, len * CH_K1, CH_K0);
    z += shift_mix(v.second) * CH_K1;
    x = city_rotate(z + x, 39) * CH_K1;
    y = city_rotate(y, 33) * CH_K1;
    len = (len - 1) & ~(size_t)63;
    do {
        x = city_rotate(x + y + v.first + load64(s + 16), 37) * CH_K1;
        y = city_rotate(y + v.second + load64(s + 48), 42) * CH_K1;
        x ^= w.second;
        y ^= v.first;
        z = city_rotate(z ^ w.first, 33);
        v = weak_len32_seeds(s, v.second * CH_K1, x + w.first);
        w = weak_len32_seeds(s + 32, z + w.second, y);
        u64 t = z;
        z = x;
        x = t;
        s += 64;
        len -= 64;
    } while (len != 0);
    return hash_len16(hash_len16(v.first, w.first) + shift_mix(y) * CH_K1 + z,
                      hash_len16(v.second, w.second) + x);
}

/* CityHash64WithSeed(s, seed) = HashLen16(CityHash64(s) - k2, seed): the expensive part does not
 * depend on the seed, so the text indexes hash each token once and derive both seeded hashes. */
static inline u64 city_seeded_from(u64 unseeded, u64 seed) { return hash_len16(unseeded - CH_K2, seed); }

static inline pair64 city_murmur(const u8 *s, size_t len, u64 seed_lo, u64 seed_hi) {
    u64 a = seed_lo, b = seed_hi, c = 0, d = 0;
    int64_t l = (int64_t)len - 16;
    if (l <= 0) {
        a = shift_mix(a * CH_K1) * CH_K1;
        c = b * CH_K1 + hash_len0to16(s, len);
        d = shift_mix(a + (len >= 8 ? load64(s) : c));
    } else {
        c = hash_len16(load64(s + len - 8) + CH_K1, a);
        d = hash_len16(b + len, c + load64(s + len - 16));
        a += d;
        do {
            a ^= shift_mix(load64(s) * CH_K1) * CH_K1;
            a *= CH_K1;
            b ^= a;
            c ^= shift_mix(load64(s + 8) * CH_K1) * CH_K1;
            c *= CH_K1;
            d ^= c;
            s += 16;
            l -= 16;
        } while (l > 0);
    }
    a = hash_len16(a, c);
    b = hash_len16(d, b);
    pair64 r = {a ^ b, hash_len16(b, a)};
    return r;
}

static inline pair64 city_hash128_with_seed(const u8 *s, size_t len, u64 seed_lo, u64 seed_hi) {
    if (len < 128)
        return city_murmur(s, len, seed_lo, seed_hi);
    pair64 v, w;
    u64 x = seed_lo, y = seed_hi, z = len * CH_K1;
    v.first = city_rotate(y ^ CH_K1, 49) * CH_K1 + load64(s);
    v.second = city_rotate(v.first, 42) * CH_K1 + load64(s + 8);
    w.first = city_rotate(y + z, 35) * CH_K1 + x;
    w.second = city_rotate(x + load64(s + 88), 53) * CH_K1;
    do {
        for (int round = 0; round < 2; round++) {
            x = city_rotate(x + y + v.first + load64(s + 16), 37) * CH_K1;
            y = city_rotate(y + v.second + load64(s + 48), 42) * CH_K1;
            x ^= w.second;
            y ^= v.first;
            z = city_rotate(z ^ w.first, 33);
            v = weak_len32_seeds(s, v.second * CH_K1, x + w.first);
            w = weak_len32_seeds(s + 32, z + w.second, y);
            u64 t = z;
            z = x;
            x = t;
            s += 64;
        }
        len -= 128;
    } while (len >= 128);
    y += city_rotate(w.first, 37) * CH_K0 + z;
    x += city_rotate(v.first + z, 49) * CH_K0;
    for (size_t tail_done = 0; tail_done < len;) {
        tail_done += 32;
        y = city_rotate(y - x, 42) * CH_K0 + v.second;
        w.first += load64(s + len - tail_done + 16);
        x = city_rotate(x, 49) * CH_K0 + w.first;
        w.first += v.first;
        v = weak_len32_seeds(s + len - tail_done, v.first, v.second);
    }
    x = hash_len16(x, v.first);
    y = hash_len16(y, w.first);
    pair64 r = {hash_len16(x + v.second, w.second) + y, hash_len16(x + w.second, y + v.second)};
    return r;
}

static inline pair64 city_hash128(const u8 *s, size_t len) {
    if (len >= 16)
        return city_hash128_with_seed(s + 16, len - 16, load64(s) ^ CH_K3, load64(s + 8));
    if (len >= 8)
        return city_hash128_with_seed(NULL, 0, load64(s) ^ (len * CH_K0), load64(s + len - 8) ^ CH_K1);
    return city_hash128_with_seed(s, len, CH_K0, CH_K1);
}

/* ------------------------------------------------------------------------------------------ */
/* XXH64 (xxHash's 64-bit hash): Parquet's split-block Bloom filters hash with it, seed 0       */
/* ------------------------------------------------------------------------------------------ */

#define XXH_P1 0x9E3779B185EBCA87ULL
#define XXH_P2 0xC2B2AE3D27D4EB4FULL
#define XXH_P3 0x165667B19E3779F9ULL
#define XXH_P4 0x85EBCA77C2B2AE63ULL
#define XXH_P5 0x27D4EB2F165667C5ULL

static inline u64 xxh64_round(u64 acc, u64 input) {
    acc += input * XXH_P2;
    acc = rotl64(acc, 31);
    return acc * XXH_P1;
}

static inline u64 xxh64_merge(u64 acc, u64 val) {
    acc ^= xxh64_round(0, val);
    return acc * XXH_P1 + XXH_P4;
}

static inline u64 xxh64(const u8 *p, size_t len, u64 seed) {
    size_t rem = len; /* bytes left from p; pointers never step past the end */
    u64 h;
    if (len >= 32) {
        u64 v1 = seed + XXH_P1 + XXH_P2, v2 = seed + XXH_P2, v3 = seed, v4 = seed - XXH_P1;
        do {
            v1 = xxh64_round(v1, load64(p));
            v2 = xxh64_round(v2, load64(p + 8));
            v3 = xxh64_round(v3, load64(p + 16));
            v4 = xxh64_round(v4, load64(p + 24));
            p += 32;
            rem -= 32;
        } while (rem >= 32);
        h = rotl64(v1, 1) + rotl64(v2, 7) + rotl64(v3, 12) + rotl64(v4, 18);
        h = xxh64_merge(h, v1);
        h = xxh64_merge(h, v2);
        h = xxh64_merge(h, v3);
        h = xxh64_merge(h, v4);
    } else {
        h = seed + XXH_P5;
    }
    h += (u64)len;
    for (; rem >= 8; p += 8, rem -= 8) {
        h ^= xxh64_round(0, load64(p));
        h = rotl64(h, 27) * XXH_P1 + XXH_P4;
    }
    if (rem >= 4) {
        h ^= (u64)load32(p) * XXH_P1;
        h = rotl64(h, 23) * XXH_P2 + XXH_P3;
        p += 4;
        rem -= 4;
    }
    for (; rem > 0; p++, rem--) {
        h ^= (u64)*p * XXH_P5;
        h = rotl64(h, 11) * XXH_P1;
    }
    h ^= h >> 33;
    h *= XXH_P2;
    h ^= h >> 29;
    h *= XXH_P3;
    h ^= h >> 32;
    return h;
}

PyObject *py_murmur3_128(PyObject *self, PyObject *args);
PyObject *py_tsfile_hash32(PyObject *self, PyObject *args);
PyObject *py_cityhash64(PyObject *self, PyObject *args);
PyObject *py_cityhash64_with_seed(PyObject *self, PyObject *args);
PyObject *py_cityhash128(PyObject *self, PyObject *args);
PyObject *py_hash128_to_64(PyObject *self, PyObject *args);
PyObject *py_int_hash64(PyObject *self, PyObject *args);
PyObject *py_xxhash64(PyObject *self, PyObject *args);
PyObject *py_hash_batch(PyObject *self, PyObject *args);
PyObject *py_hash128_to_64_array(PyObject *self, PyObject *args);
PyObject *py_int_hash64_array(PyObject *self, PyObject *args);

#endif
