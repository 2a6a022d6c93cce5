/*
 * bloomskip._native: the hot kernels of bloomskip.
 *
 * Hashes (MurmurHash3 x64-128 and TsFile's Murmur128Hash variants, CityHash v1.0.2, ClickHouse's
 * intHash64), the three bit-position schemes of TsFile and ClickHouse, bitset operations, and the
 * per-granule builders of ClickHouse's bloom_filter and ngrambf_v1/tokenbf_v1 indexes.
 *
 * The module speaks only the buffer protocol: Python allocates every output (numpy arrays) and
 * passes it in, so nothing here depends on the numpy C API. Every length, offset and index is
 * checked before it is used; a bad argument raises ValueError or TypeError, never reads out of
 * bounds.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

typedef uint64_t u64;
typedef uint32_t u32;
typedef uint8_t u8;
typedef unsigned __int128 u128;

/* ------------------------------------------------------------------------------------------ */
/* Little helpers                                                                              */
/* ------------------------------------------------------------------------------------------ */

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

static fastmod_t fastmod_init(u64 d) {
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

static u64 hash_len0to16(const u8 *s, size_t len) {
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

static u64 hash_len17to32(const u8 *s, size_t len) {
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

static u64 hash_len33to64(const u8 *s, size_t len) {
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

static u64 city_hash64(const u8 *s, size_t len) {
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

static pair64 city_murmur(const u8 *s, size_t len, u64 seed_lo, u64 seed_hi) {
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

static pair64 city_hash128_with_seed(const u8 *s, size_t len, u64 seed_lo, u64 seed_hi) {
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

static pair64 city_hash128(const u8 *s, size_t len) {
    if (len >= 16)
        return city_hash128_with_seed(s + 16, len - 16, load64(s) ^ CH_K3, load64(s + 8));
    if (len >= 8)
        return city_hash128_with_seed(NULL, 0, load64(s) ^ (len * CH_K0), load64(s + len - 8) ^ CH_K1);
    return city_hash128_with_seed(s, len, CH_K0, CH_K1);
}

/* ------------------------------------------------------------------------------------------ */
/* ClickHouse constants                                                                        */
/* ------------------------------------------------------------------------------------------ */

static const u64 BF_HASH_SEED[15] = {
    13635471485423070496ULL, 10336109063487487899ULL, 17779957404565211594ULL,
    8988612159822229247ULL,  4954614162757618085ULL,  12980113590177089081ULL,
    9263883436177860930ULL,  3656772712723269762ULL,  10362091744962961274ULL,
    7582936617938287249ULL,  15033938188484401405ULL, 18286745649494826751ULL,
    6852245486148412312ULL,  8886056245089344681ULL,  10151472371158292780ULL};

#define SEED_GEN_A 845897321ULL
#define SEED_GEN_B 217728422ULL

/* ------------------------------------------------------------------------------------------ */
/* Buffers and batches                                                                         */
/* ------------------------------------------------------------------------------------------ */

/* A batch of byte strings: either variable-length (offsets of 4 or 8 bytes each, as in an Arrow
 * string/binary array) or fixed-width items laid end to end. */
typedef struct {
    Py_buffer data;
    Py_buffer offsets; /* .obj == NULL for fixed-width items */
    Py_ssize_t first;  /* index of the first item in offsets (Arrow's array offset) */
    Py_ssize_t count;
    Py_ssize_t width; /* fixed item width, when there are no offsets */
    int offset_size;  /* 4 or 8 */
} batch_t;

static void batch_release(batch_t *b) {
    if (b->data.obj)
        PyBuffer_Release(&b->data);
    if (b->offsets.obj)
        PyBuffer_Release(&b->offsets);
}

static inline int64_t batch_offset(const batch_t *b, Py_ssize_t i) {
    if (b->offset_size == 4) {
        int32_t v;
        memcpy(&v, (const u8 *)b->offsets.buf + 4 * i, 4);
        return v;
    }
    int64_t v;
    memcpy(&v, (const u8 *)b->offsets.buf + 8 * i, 8);
    return v;
}

/* Parse (data, offsets | None, first, count, width) and check every offset once, up front, so the
 * kernels below may index items without further checks. */
static int batch_parse(PyObject *spec, batch_t *b) {
    memset(b, 0, sizeof(*b));
    PyObject *data_obj, *offsets_obj;
    if (!PyTuple_Check(spec) || PyTuple_GET_SIZE(spec) != 5) {
        PyErr_SetString(PyExc_TypeError, "batch must be a (data, offsets, first, count, width) tuple");
        return -1;
    }
    data_obj = PyTuple_GET_ITEM(spec, 0);
    offsets_obj = PyTuple_GET_ITEM(spec, 1);
    b->first = PyLong_AsSsize_t(PyTuple_GET_ITEM(spec, 2));
    b->count = PyLong_AsSsize_t(PyTuple_GET_ITEM(spec, 3));
    b->width = PyLong_AsSsize_t(PyTuple_GET_ITEM(spec, 4));
    if (PyErr_Occurred())
        return -1;
    if (b->first < 0 || b->count < 0 || b->width < 0) {
        PyErr_SetString(PyExc_ValueError, "batch: first, count and width must be >= 0");
        return -1;
    }
    if (PyObject_GetBuffer(data_obj, &b->data, PyBUF_SIMPLE) < 0)
        return -1;
    if (offsets_obj == Py_None) {
        if (b->width == 0 && b->count > 0) {
            PyErr_SetString(PyExc_ValueError, "batch: fixed-width items need width >= 1");
            goto fail;
        }
        if (b->width > 0 && b->count > (PY_SSIZE_T_MAX / b->width) - b->first) {
            PyErr_SetString(PyExc_ValueError, "batch: item count overflows");
            goto fail;
        }
        if ((b->first + b->count) * b->width > b->data.len) {
            PyErr_Format(PyExc_ValueError,
                         "batch: %zd items of %zd bytes from item %zd exceed the %zd-byte data buffer",
                         b->count, b->width, b->first, b->data.len);
            goto fail;
        }
        return 0;
    }
    if (PyObject_GetBuffer(offsets_obj, &b->offsets, PyBUF_SIMPLE) < 0)
        goto fail;
    if (b->width != 4 && b->width != 8) {
        PyErr_SetString(PyExc_ValueError, "batch: offsets must be 4 or 8 bytes wide");
        goto fail;
    }
    b->offset_size = (int)b->width;
    b->width = 0;
    if (b->first > PY_SSIZE_T_MAX / 16 || b->count > PY_SSIZE_T_MAX / 16 ||
        (b->first + b->count + 1) * b->offset_size > b->offsets.len) {
        PyErr_Format(PyExc_ValueError, "batch: offsets buffer of %zd bytes is too short for %zd items",
                     b->offsets.len, b->count);
        goto fail;
    }
    int64_t prev = batch_offset(b, b->first);
    if (prev < 0 || prev > b->data.len) {
        PyErr_Format(PyExc_ValueError, "batch: offset %lld of item %zd is outside the data buffer",
                     (long long)prev, b->first);
        goto fail;
    }
    for (Py_ssize_t i = 1; i <= b->count; i++) {
        int64_t cur = batch_offset(b, b->first + i);
        if (cur < prev || cur > b->data.len) {
            PyErr_Format(PyExc_ValueError,
                         "batch: offset %lld of item %zd is decreasing or outside the data buffer",
                         (long long)cur, b->first + i);
            goto fail;
        }
        prev = cur;
    }
    return 0;
fail:
    batch_release(b);
    return -1;
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

/* Item i of a batch, for random access (granule ranges). */
static inline const u8 *batch_item_at(const batch_t *b, Py_ssize_t i, size_t *len) {
    const u8 *base = (const u8 *)b->data.buf;
    if (b->offset_size == 0) {
        *len = (size_t)b->width;
        return base + (b->first + i) * b->width;
    }
    int64_t start = batch_offset(b, b->first + i);
    *len = (size_t)(batch_offset(b, b->first + i + 1) - start);
    return base + start;
}

/* Run the body for every item `i` of batch B with `const u8 *p` and `size_t len` bound to it. The
 * layout (4- or 8-byte offsets, or fixed width) is resolved once, outside the loop, which keeps
 * the per-item cost to the hash itself. */
#define FOR_EACH_ITEM(B, ...)                                                                     \
    do {                                                                                           \
        const u8 *base_ = (const u8 *)(B).data.buf;                                                \
        const u8 *offs_ = (const u8 *)(B).offsets.buf;                                             \
        if ((B).offset_size == 4) {                                                                \
            offs_ += 4 * (B).first;                                                                \
            int64_t next_ = load_i32(offs_);                                                       \
            for (Py_ssize_t i = 0; i < (B).count; i++) {                                           \
                int64_t start_ = next_;                                                            \
                next_ = load_i32(offs_ + 4 * (i + 1));                                             \
                const u8 *p = base_ + start_;                                                      \
                size_t len = (size_t)(next_ - start_);                                             \
                __VA_ARGS__                                                                        \
            }                                                                                      \
        } else if ((B).offset_size == 8) {                                                         \
            offs_ += 8 * (B).first;                                                                \
            int64_t next_ = load_i64(offs_);                                                       \
            for (Py_ssize_t i = 0; i < (B).count; i++) {                                           \
                int64_t start_ = next_;                                                            \
                next_ = load_i64(offs_ + 8 * (i + 1));                                             \
                const u8 *p = base_ + start_;                                                      \
                size_t len = (size_t)(next_ - start_);                                             \
                __VA_ARGS__                                                                        \
            }                                                                                      \
        } else {                                                                                   \
            const size_t w_ = (size_t)(B).width;                                                   \
            for (Py_ssize_t i = 0; i < (B).count; i++) {                                           \
                const u8 *p = base_ + ((size_t)(B).first + (size_t)i) * w_;                        \
                size_t len = w_;                                                                   \
                __VA_ARGS__                                                                        \
            }                                                                                      \
        }                                                                                          \
    } while (0)

/* A writable output buffer holding at least `count` items of `itemsize` bytes. */
static int get_out(PyObject *obj, Py_buffer *view, Py_ssize_t count, Py_ssize_t itemsize,
                   const char *name) {
    if (PyObject_GetBuffer(obj, view, PyBUF_WRITABLE) < 0)
        return -1;
    if (count > 0 && view->len / itemsize < count) {
        PyErr_Format(PyExc_ValueError, "%s: output buffer holds %zd bytes, %zd needed", name,
                     view->len, count * itemsize);
        PyBuffer_Release(view);
        return -1;
    }
    return 0;
}

/* A read-only input buffer of u64 values. */
static int get_u64s(PyObject *obj, Py_buffer *view, const char *name) {
    if (PyObject_GetBuffer(obj, view, PyBUF_SIMPLE) < 0)
        return -1;
    if (view->len % 8 != 0) {
        PyErr_Format(PyExc_ValueError, "%s: buffer length %zd is not a multiple of 8", name, view->len);
        PyBuffer_Release(view);
        return -1;
    }
    return 0;
}

static inline u64 u64_at(const Py_buffer *v, Py_ssize_t i) {
    u64 x;
    memcpy(&x, (const u8 *)v->buf + 8 * i, 8);
    return x;
}

static inline void store_u64(Py_buffer *v, Py_ssize_t i, u64 x) { memcpy((u8 *)v->buf + 8 * i, &x, 8); }

static int check_k(long k, long max_k, const char *name) {
    if (k < 1 || k > max_k) {
        PyErr_Format(PyExc_ValueError, "%s must be in 1..%ld, got %ld", name, max_k, k);
        return -1;
    }
    return 0;
}

static int check_bit_count(unsigned long long bit_count) {
    if (bit_count == 0) {
        PyErr_SetString(PyExc_ValueError, "bit_count must be > 0");
        return -1;
    }
    return 0;
}

/* ------------------------------------------------------------------------------------------ */
/* Scalar hashes                                                                               */
/* ------------------------------------------------------------------------------------------ */

static PyObject *py_murmur3_128(PyObject *self, PyObject *args) {
    Py_buffer buf;
    unsigned long long seed;
    if (!PyArg_ParseTuple(args, "y*K", &buf, &seed))
        return NULL;
    u64 h1, h2;
    Py_BEGIN_ALLOW_THREADS murmur3_128((const u8 *)buf.buf, (size_t)buf.len, seed, 0, &h1, &h2);
    Py_END_ALLOW_THREADS PyBuffer_Release(&buf);
    return Py_BuildValue("(KK)", (unsigned long long)h1, (unsigned long long)h2);
}

static PyObject *py_tsfile_hash32(PyObject *self, PyObject *args) {
    Py_buffer buf;
    int seed, signed_tail;
    if (!PyArg_ParseTuple(args, "y*ip", &buf, &seed, &signed_tail))
        return NULL;
    int32_t h = tsfile_hash32((const u8 *)buf.buf, (size_t)buf.len, seed, signed_tail);
    PyBuffer_Release(&buf);
    return PyLong_FromLong(h);
}

static PyObject *py_cityhash64(PyObject *self, PyObject *args) {
    Py_buffer buf;
    if (!PyArg_ParseTuple(args, "y*", &buf))
        return NULL;
    u64 h = city_hash64((const u8 *)buf.buf, (size_t)buf.len);
    PyBuffer_Release(&buf);
    return PyLong_FromUnsignedLongLong(h);
}

static PyObject *py_cityhash64_with_seed(PyObject *self, PyObject *args) {
    Py_buffer buf;
    unsigned long long seed;
    if (!PyArg_ParseTuple(args, "y*K", &buf, &seed))
        return NULL;
    u64 h = city_seeded_from(city_hash64((const u8 *)buf.buf, (size_t)buf.len), seed);
    PyBuffer_Release(&buf);
    return PyLong_FromUnsignedLongLong(h);
}

static PyObject *py_cityhash128(PyObject *self, PyObject *args) {
    Py_buffer buf;
    if (!PyArg_ParseTuple(args, "y*", &buf))
        return NULL;
    pair64 h = city_hash128((const u8 *)buf.buf, (size_t)buf.len);
    PyBuffer_Release(&buf);
    return Py_BuildValue("(KK)", (unsigned long long)h.first, (unsigned long long)h.second);
}

static PyObject *py_hash128_to_64(PyObject *self, PyObject *args) {
    unsigned long long low, high;
    if (!PyArg_ParseTuple(args, "KK", &low, &high))
        return NULL;
    return PyLong_FromUnsignedLongLong(hash128_to_64(low, high));
}

static PyObject *py_int_hash64(PyObject *self, PyObject *args) {
    unsigned long long x;
    if (!PyArg_ParseTuple(args, "K", &x))
        return NULL;
    return PyLong_FromUnsignedLongLong(fmix64(x));
}

/* ------------------------------------------------------------------------------------------ */
/* Batch hashes                                                                                */
/* ------------------------------------------------------------------------------------------ */

/* Which hash hash_batch computes. */
enum { HASH_MURMUR3_128, HASH_TSFILE32, HASH_CITY64, HASH_CITY64_SEEDED, HASH_CITY128 };

/* hash_batch(kind, batch, seed, signed_tail, out1, out2): one hash over every item of a batch.
 * out1 takes int32 for HASH_TSFILE32 and u64 otherwise; out2 (u64) the second half of the
 * 128-bit hashes, None for the others. The seed is the 64-bit pattern: zero-extended for
 * MurmurHash3 (uint32) and CityHash (uint64), the sign-extended Java int for TsFile. */
static PyObject *py_hash_batch(PyObject *self, PyObject *args) {
    int kind, signed_tail;
    PyObject *spec, *o1, *o2;
    unsigned long long seed;
    if (!PyArg_ParseTuple(args, "iOKpOO", &kind, &spec, &seed, &signed_tail, &o1, &o2))
        return NULL;
    if (kind < HASH_MURMUR3_128 || kind > HASH_CITY128) {
        PyErr_Format(PyExc_ValueError, "unknown hash kind %d", kind);
        return NULL;
    }
    int halves = kind == HASH_MURMUR3_128 || kind == HASH_CITY128;
    batch_t b;
    if (batch_parse(spec, &b) < 0)
        return NULL;
    Py_buffer v1 = {0}, v2 = {0};
    PyObject *result = NULL;
    if (get_out(o1, &v1, b.count, kind == HASH_TSFILE32 ? 4 : 8, "hash output") < 0)
        goto done;
    if (halves && get_out(o2, &v2, b.count, 8, "second hash output") < 0)
        goto done;
    Py_BEGIN_ALLOW_THREADS switch (kind) {
    case HASH_MURMUR3_128:
        FOR_EACH_ITEM(b, {
            u64 h1, h2;
            murmur3_128(p, len, seed, 0, &h1, &h2);
            store_u64(&v1, i, h1);
            store_u64(&v2, i, h2);
        });
        break;
    case HASH_TSFILE32:
        FOR_EACH_ITEM(b, {
            int32_t h = tsfile_hash32(p, len, (int32_t)(int64_t)seed, signed_tail);
            memcpy((u8 *)v1.buf + 4 * i, &h, 4);
        });
        break;
    case HASH_CITY64:
        FOR_EACH_ITEM(b, { store_u64(&v1, i, city_hash64(p, len)); });
        break;
    case HASH_CITY64_SEEDED:
        FOR_EACH_ITEM(b, { store_u64(&v1, i, city_seeded_from(city_hash64(p, len), seed)); });
        break;
    case HASH_CITY128:
        FOR_EACH_ITEM(b, {
            pair64 h = city_hash128(p, len);
            store_u64(&v1, i, h.first);
            store_u64(&v2, i, h.second);
        });
        break;
    }
    Py_END_ALLOW_THREADS result = Py_None;
    Py_INCREF(result);
done:
    if (v1.obj)
        PyBuffer_Release(&v1);
    if (v2.obj)
        PyBuffer_Release(&v2);
    batch_release(&b);
    return result;
}

/* out[i] = Hash128to64(low[i], high[i]); out may alias an input. */
static PyObject *py_hash128_to_64_array(PyObject *self, PyObject *args) {
    PyObject *lo_obj, *hi_obj, *out;
    if (!PyArg_ParseTuple(args, "OOO", &lo_obj, &hi_obj, &out))
        return NULL;
    Py_buffer lo, hi, v;
    if (get_u64s(lo_obj, &lo, "low") < 0)
        return NULL;
    if (get_u64s(hi_obj, &hi, "high") < 0) {
        PyBuffer_Release(&lo);
        return NULL;
    }
    Py_ssize_t n = lo.len / 8;
    if (hi.len / 8 != n) {
        PyErr_SetString(PyExc_ValueError, "low and high must have the same length");
        PyBuffer_Release(&lo);
        PyBuffer_Release(&hi);
        return NULL;
    }
    if (get_out(out, &v, n, 8, "hash128_to_64") < 0) {
        PyBuffer_Release(&lo);
        PyBuffer_Release(&hi);
        return NULL;
    }
    Py_BEGIN_ALLOW_THREADS for (Py_ssize_t i = 0; i < n; i++)
        store_u64(&v, i, hash128_to_64(u64_at(&lo, i), u64_at(&hi, i)));
    Py_END_ALLOW_THREADS PyBuffer_Release(&lo);
    PyBuffer_Release(&hi);
    PyBuffer_Release(&v);
    Py_RETURN_NONE;
}

/* out[i] = intHash64(x[i]); out may alias x. */
static PyObject *py_int_hash64_array(PyObject *self, PyObject *args) {
    PyObject *x_obj, *out;
    if (!PyArg_ParseTuple(args, "OO", &x_obj, &out))
        return NULL;
    Py_buffer x, v;
    if (get_u64s(x_obj, &x, "x") < 0)
        return NULL;
    Py_ssize_t n = x.len / 8;
    if (get_out(out, &v, n, 8, "int_hash64") < 0) {
        PyBuffer_Release(&x);
        return NULL;
    }
    Py_BEGIN_ALLOW_THREADS for (Py_ssize_t i = 0; i < n; i++) store_u64(&v, i, fmix64(u64_at(&x, i)));
    Py_END_ALLOW_THREADS PyBuffer_Release(&x);
    PyBuffer_Release(&v);
    Py_RETURN_NONE;
}

/* ------------------------------------------------------------------------------------------ */
/* Bitsets                                                                                     */
/* ------------------------------------------------------------------------------------------ */

static inline void bit_set(u8 *bits, u64 p) { bits[p >> 3] |= (u8)(1u << (p & 7)); }

/* A position past the end of a shorter buffer reads as 0: TsFile omits trailing zero bytes. */
static inline int bit_get(const u8 *bits, Py_ssize_t nbytes, u64 p) {
    return (p >> 3) < (u64)nbytes && ((bits[p >> 3] >> (p & 7)) & 1);
}

static PyObject *py_set_bits(PyObject *self, PyObject *args) {
    PyObject *bits_obj, *pos_obj;
    if (!PyArg_ParseTuple(args, "OO", &bits_obj, &pos_obj))
        return NULL;
    Py_buffer bits, pos;
    if (PyObject_GetBuffer(bits_obj, &bits, PyBUF_WRITABLE) < 0)
        return NULL;
    if (get_u64s(pos_obj, &pos, "positions") < 0) {
        PyBuffer_Release(&bits);
        return NULL;
    }
    Py_ssize_t n = pos.len / 8;
    u64 limit = (u64)bits.len * 8;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (u64_at(&pos, i) >= limit) {
            PyErr_Format(PyExc_ValueError, "positions: %llu is outside the %llu-bit bitset",
                         (unsigned long long)u64_at(&pos, i), (unsigned long long)limit);
            PyBuffer_Release(&bits);
            PyBuffer_Release(&pos);
            return NULL;
        }
    }
    for (Py_ssize_t i = 0; i < n; i++)
        bit_set((u8 *)bits.buf, u64_at(&pos, i));
    PyBuffer_Release(&bits);
    PyBuffer_Release(&pos);
    Py_RETURN_NONE;
}

static PyObject *py_test_bits(PyObject *self, PyObject *args) {
    PyObject *bits_obj, *pos_obj, *out;
    if (!PyArg_ParseTuple(args, "OOO", &bits_obj, &pos_obj, &out))
        return NULL;
    Py_buffer bits, pos, v;
    if (PyObject_GetBuffer(bits_obj, &bits, PyBUF_SIMPLE) < 0)
        return NULL;
    if (get_u64s(pos_obj, &pos, "positions") < 0) {
        PyBuffer_Release(&bits);
        return NULL;
    }
    Py_ssize_t n = pos.len / 8;
    if (get_out(out, &v, n, 1, "test_bits") < 0) {
        PyBuffer_Release(&bits);
        PyBuffer_Release(&pos);
        return NULL;
    }
    for (Py_ssize_t i = 0; i < n; i++)
        ((u8 *)v.buf)[i] = (u8)bit_get((const u8 *)bits.buf, bits.len, u64_at(&pos, i));
    PyBuffer_Release(&bits);
    PyBuffer_Release(&pos);
    PyBuffer_Release(&v);
    Py_RETURN_NONE;
}

static u64 popcount_bytes(const u8 *p, Py_ssize_t n) {
    u64 total = 0;
    Py_ssize_t i = 0;
    for (; i + 8 <= n; i += 8)
        total += (u64)__builtin_popcountll(load64(p + i));
    for (; i < n; i++)
        total += (u64)__builtin_popcount(p[i]);
    return total;
}

static PyObject *py_popcount(PyObject *self, PyObject *args) {
    Py_buffer bits;
    if (!PyArg_ParseTuple(args, "y*", &bits))
        return NULL;
    u64 total = popcount_bytes((const u8 *)bits.buf, bits.len);
    PyBuffer_Release(&bits);
    return PyLong_FromUnsignedLongLong(total);
}

/* Popcount of each row of a (rows, width) byte matrix. */
static PyObject *py_popcount_rows(PyObject *self, PyObject *args) {
    Py_buffer m, v;
    Py_ssize_t width;
    PyObject *out;
    if (!PyArg_ParseTuple(args, "y*nO", &m, &width, &out))
        return NULL;
    if (width <= 0 || m.len % width != 0) {
        PyErr_SetString(PyExc_ValueError, "popcount_rows: width must divide the matrix length");
        PyBuffer_Release(&m);
        return NULL;
    }
    Py_ssize_t rows = m.len / width;
    if (get_out(out, &v, rows, 8, "popcount_rows") < 0) {
        PyBuffer_Release(&m);
        return NULL;
    }
    for (Py_ssize_t r = 0; r < rows; r++)
        store_u64(&v, r, popcount_bytes((const u8 *)m.buf + r * width, width));
    PyBuffer_Release(&m);
    PyBuffer_Release(&v);
    Py_RETURN_NONE;
}

static PyObject *py_union_into(PyObject *self, PyObject *args) {
    PyObject *dst_obj;
    Py_buffer src, dst;
    if (!PyArg_ParseTuple(args, "Oy*", &dst_obj, &src))
        return NULL;
    if (PyObject_GetBuffer(dst_obj, &dst, PyBUF_WRITABLE) < 0) {
        PyBuffer_Release(&src);
        return NULL;
    }
    if (dst.len != src.len) {
        PyErr_Format(PyExc_ValueError, "bitsets differ in length: %zd and %zd bytes", dst.len, src.len);
    } else {
        u8 *d = (u8 *)dst.buf;
        const u8 *s = (const u8 *)src.buf;
        for (Py_ssize_t i = 0; i < dst.len; i++)
            d[i] |= s[i];
    }
    PyBuffer_Release(&src);
    PyBuffer_Release(&dst);
    if (PyErr_Occurred())
        return NULL;
    Py_RETURN_NONE;
}

static int covers_bytes(const u8 *a, const u8 *b, Py_ssize_t n) {
    Py_ssize_t i = 0;
    for (; i + 8 <= n; i += 8) {
        u64 y = load64(b + i);
        if ((load64(a + i) & y) != y)
            return 0;
    }
    for (; i < n; i++)
        if ((a[i] & b[i]) != b[i])
            return 0;
    return 1;
}

static PyObject *py_covers(PyObject *self, PyObject *args) {
    Py_buffer a, b;
    if (!PyArg_ParseTuple(args, "y*y*", &a, &b))
        return NULL;
    int r = -1;
    if (a.len != b.len)
        PyErr_Format(PyExc_ValueError, "bitsets differ in length: %zd and %zd bytes", a.len, b.len);
    else
        r = covers_bytes((const u8 *)a.buf, (const u8 *)b.buf, a.len);
    PyBuffer_Release(&a);
    PyBuffer_Release(&b);
    if (r < 0)
        return NULL;
    return PyBool_FromLong(r);
}

static PyObject *py_covers_rows(PyObject *self, PyObject *args) {
    Py_buffer m, q, v;
    PyObject *out;
    if (!PyArg_ParseTuple(args, "y*y*O", &m, &q, &out))
        return NULL;
    Py_ssize_t width = q.len;
    if (width <= 0 || m.len % width != 0) {
        PyErr_Format(PyExc_ValueError, "covers_rows: a %zd-byte query does not divide the %zd-byte matrix",
                     width, m.len);
        PyBuffer_Release(&m);
        PyBuffer_Release(&q);
        return NULL;
    }
    Py_ssize_t rows = m.len / width;
    if (get_out(out, &v, rows, 1, "covers_rows") < 0) {
        PyBuffer_Release(&m);
        PyBuffer_Release(&q);
        return NULL;
    }
    Py_BEGIN_ALLOW_THREADS for (Py_ssize_t r = 0; r < rows; r++)((u8 *)v.buf)[r] =
        (u8)covers_bytes((const u8 *)m.buf + r * width, (const u8 *)q.buf, width);
    Py_END_ALLOW_THREADS PyBuffer_Release(&m);
    PyBuffer_Release(&q);
    PyBuffer_Release(&v);
    Py_RETURN_NONE;
}

/* ------------------------------------------------------------------------------------------ */
/* Position schemes                                                                            */
/* ------------------------------------------------------------------------------------------ */

/* op 0: write positions to out (n*k i64), 1: set bits, 2: test all k bits into out (n bytes) */
static PyObject *py_tsfile_op(PyObject *self, PyObject *args) {
    int op, signed_tail;
    PyObject *bits_obj, *spec, *out;
    unsigned long long bit_count;
    long k;
    if (!PyArg_ParseTuple(args, "iOOKlpO", &op, &bits_obj, &spec, &bit_count, &k, &signed_tail, &out))
        return NULL;
    if (check_bit_count(bit_count) < 0 || check_k(k, 8, "hash_function_count") < 0)
        return NULL;
    batch_t b;
    if (batch_parse(spec, &b) < 0)
        return NULL;
    Py_buffer bits = {0}, v = {0};
    PyObject *result = NULL;
    if (op != 0) {
        if (PyObject_GetBuffer(bits_obj, &bits, op == 1 ? PyBUF_WRITABLE : PyBUF_SIMPLE) < 0)
            goto done;
        if (op == 1 && (u64)bits.len < (bit_count + 7) / 8) {
            PyErr_Format(PyExc_ValueError, "bitset of %zd bytes is shorter than bit_count %llu", bits.len,
                         bit_count);
            goto done;
        }
    }
    if (op != 1 && get_out(out, &v, op == 0 ? b.count * k : b.count, op == 0 ? 8 : 1, "tsfile") < 0)
        goto done;
    Py_BEGIN_ALLOW_THREADS FOR_EACH_ITEM(b, {
        int hit = 1;
        for (long j = 0; j < k; j++) {
            u64 pos = tsfile_index(tsfile_hash32(p, len, TSFILE_SEEDS[j], signed_tail), bit_count);
            if (op == 0) {
                int64_t sp = (int64_t)pos;
                memcpy((u8 *)v.buf + 8 * (i * k + j), &sp, 8);
            } else if (op == 1) {
                bit_set((u8 *)bits.buf, pos);
            } else if (!bit_get((const u8 *)bits.buf, bits.len, pos)) {
                hit = 0;
                break;
            }
        }
        if (op == 2)
            ((u8 *)v.buf)[i] = (u8)hit;
    });
    Py_END_ALLOW_THREADS result = Py_None;
    Py_INCREF(result);
done:
    if (bits.obj)
        PyBuffer_Release(&bits);
    if (v.obj)
        PyBuffer_Release(&v);
    batch_release(&b);
    return result;
}

/* ClickHouse bloom_filter: pos_i = Hash128to64(h, BF_HASH_SEED[i]) mod bit_count.
 * op 0: positions into out (n*k u64), 1: set, 2: test into out (n bytes). */
static PyObject *py_seeded_op(PyObject *self, PyObject *args) {
    int op;
    PyObject *bits_obj, *hashes_obj, *out;
    unsigned long long bit_count;
    long k;
    if (!PyArg_ParseTuple(args, "iOOKlO", &op, &bits_obj, &hashes_obj, &bit_count, &k, &out))
        return NULL;
    if (check_bit_count(bit_count) < 0 || check_k(k, 15, "hash_functions") < 0)
        return NULL;
    Py_buffer h, bits = {0}, v = {0};
    PyObject *result = NULL;
    if (get_u64s(hashes_obj, &h, "value_hashes") < 0)
        return NULL;
    Py_ssize_t n = h.len / 8;
    if (op != 0) {
        if (PyObject_GetBuffer(bits_obj, &bits, op == 1 ? PyBUF_WRITABLE : PyBUF_SIMPLE) < 0)
            goto done;
        if ((u64)bits.len < (bit_count + 7) / 8) {
            PyErr_Format(PyExc_ValueError, "bitset of %zd bytes is shorter than bit_count %llu", bits.len,
                         bit_count);
            goto done;
        }
    }
    if (op != 1 && get_out(out, &v, op == 0 ? n * k : n, op == 0 ? 8 : 1, "seeded") < 0)
        goto done;
    fastmod_t fm = fastmod_init(bit_count);
    for (Py_ssize_t i = 0; i < n; i++) {
        u64 x = u64_at(&h, i);
        int hit = 1;
        for (long j = 0; j < k; j++) {
            u64 pos = fastmod(&fm, hash128_to_64(x, BF_HASH_SEED[j]));
            if (op == 0)
                store_u64(&v, i * k + j, pos);
            else if (op == 1)
                bit_set((u8 *)bits.buf, pos);
            else if (!bit_get((const u8 *)bits.buf, bits.len, pos)) {
                hit = 0;
                break;
            }
        }
        if (op == 2)
            ((u8 *)v.buf)[i] = (u8)hit;
    }
    result = Py_None;
    Py_INCREF(result);
done:
    PyBuffer_Release(&h);
    if (bits.obj)
        PyBuffer_Release(&bits);
    if (v.obj)
        PyBuffer_Release(&v);
    return result;
}

/* ClickHouse ngrambf/tokenbf: pos_i = (h1 + i*h2 + i*i) mod 2^64 mod bit_count. */
static inline void pair_hashes(const u8 *p, size_t len, u64 seed, u64 *h1, u64 *h2) {
    u64 base = city_hash64(p, len);
    *h1 = city_seeded_from(base, seed);
    *h2 = city_seeded_from(base, SEED_GEN_A * seed + SEED_GEN_B);
}

static PyObject *py_pair_op(PyObject *self, PyObject *args) {
    int op;
    PyObject *bits_obj, *spec, *out;
    unsigned long long seed, bit_count;
    long k;
    if (!PyArg_ParseTuple(args, "iOOKKlO", &op, &bits_obj, &spec, &seed, &bit_count, &k, &out))
        return NULL;
    if (check_bit_count(bit_count) < 0 || check_k(k, 1 << 20, "hash_functions") < 0)
        return NULL;
    batch_t b;
    if (batch_parse(spec, &b) < 0)
        return NULL;
    Py_buffer bits = {0}, v = {0};
    PyObject *result = NULL;
    if (op == 1) {
        if (PyObject_GetBuffer(bits_obj, &bits, PyBUF_WRITABLE) < 0)
            goto done;
        if ((u64)bits.len < (bit_count + 7) / 8) {
            PyErr_Format(PyExc_ValueError, "bitset of %zd bytes is shorter than bit_count %llu", bits.len,
                         bit_count);
            goto done;
        }
    } else if (get_out(out, &v, b.count * k, 8, "pair_positions") < 0) {
        goto done;
    }
    fastmod_t fm = fastmod_init(bit_count);
    Py_BEGIN_ALLOW_THREADS FOR_EACH_ITEM(b, {
        u64 h1, h2;
        pair_hashes(p, len, seed, &h1, &h2);
        for (long j = 0; j < k; j++) {
            u64 pos = fastmod(&fm, h1 + (u64)j * h2 + (u64)j * (u64)j);
            if (op == 1)
                bit_set((u8 *)bits.buf, pos);
            else
                store_u64(&v, i * k + j, pos);
        }
    });
    Py_END_ALLOW_THREADS result = Py_None;
    Py_INCREF(result);
done:
    if (bits.obj)
        PyBuffer_Release(&bits);
    if (v.obj)
        PyBuffer_Release(&v);
    batch_release(&b);
    return result;
}

/* ------------------------------------------------------------------------------------------ */
/* ClickHouse granule builders                                                                 */
/* ------------------------------------------------------------------------------------------ */

/* Read bounds (int64[G+1]) and check them against an item count. */
static int get_bounds(PyObject *obj, Py_buffer *view, Py_ssize_t granules, Py_ssize_t items,
                      const char *name) {
    if (get_u64s(obj, view, name) < 0)
        return -1;
    if (view->len / 8 != granules + 1) {
        PyErr_Format(PyExc_ValueError, "%s: %zd bounds for %zd granules (want %zd)", name, view->len / 8,
                     granules, granules + 1);
        PyBuffer_Release(view);
        return -1;
    }
    int64_t prev = (int64_t)u64_at(view, 0);
    if (prev < 0 || prev > items) {
        PyErr_Format(PyExc_ValueError, "%s: bound 0 (%lld) outside 0..%zd", name, (long long)prev, items);
        PyBuffer_Release(view);
        return -1;
    }
    for (Py_ssize_t g = 1; g <= granules; g++) {
        int64_t cur = (int64_t)u64_at(view, g);
        if (cur < prev || cur > items) {
            PyErr_Format(PyExc_ValueError, "%s: bound %zd (%lld) decreasing or past %zd items", name, g,
                         (long long)cur, items);
            PyBuffer_Release(view);
            return -1;
        }
        prev = cur;
    }
    return 0;
}

/* Open-addressing set of u64 values, reused across granules; collects the distinct values. */
typedef struct {
    u64 *slots;
    u8 *used;
    size_t cap; /* power of two */
    u64 *distinct;
    size_t count;
} u64set;

static int u64set_reset(u64set *s, size_t max_items) {
    size_t cap = 16;
    while (cap < max_items * 2)
        cap <<= 1;
    if (cap > s->cap) {
        u64 *slots = PyMem_Realloc(s->slots, cap * sizeof(u64));
        if (!slots)
            return -1;
        s->slots = slots;
        u8 *used = PyMem_Realloc(s->used, cap);
        if (!used)
            return -1;
        s->used = used;
        u64 *distinct = PyMem_Realloc(s->distinct, (cap / 2) * sizeof(u64));
        if (!distinct)
            return -1;
        s->distinct = distinct;
        s->cap = cap;
    }
    memset(s->used, 0, s->cap);
    s->count = 0;
    return 0;
}

static inline void u64set_add(u64set *s, u64 x) {
    size_t mask = s->cap - 1;
    size_t i = (size_t)fmix64(x) & mask;
    while (s->used[i]) {
        if (s->slots[i] == x)
            return;
        i = (i + 1) & mask;
    }
    s->used[i] = 1;
    s->slots[i] = x;
    s->distinct[s->count++] = x;
}

static void u64set_free(u64set *s) {
    PyMem_Free(s->slots);
    PyMem_Free(s->used);
    PyMem_Free(s->distinct);
}

static size_t varuint_size(u64 x) {
    size_t n = 1;
    while (x >= 0x80) {
        x >>= 7;
        n++;
    }
    return n;
}

static u8 *varuint_write(u8 *p, u64 x) {
    while (x >= 0x80) {
        *p++ = (u8)(x | 0x80);
        x >>= 7;
    }
    *p++ = (u8)x;
    return p;
}

#define MAX_INDEX_COLUMNS 64

/* bloom_filter_granules(columns, granules, bits_per_row, k, offsets_out, total_rows_out) -> bytes
 * columns: sequence of (value_hashes u64 buffer, bounds int64[G+1]). Each granule is serialized as
 * ClickHouse's MergeTreeIndexGranuleBloomFilter: VarUInt total_rows (the largest number of distinct
 * value hashes over the columns), then per column (bits_per_row*total_rows+7)/8 filter bytes. */
static PyObject *py_bloom_filter_granules(PyObject *self, PyObject *args) {
    PyObject *columns, *offsets_out, *rows_out;
    Py_ssize_t granules;
    unsigned long long bits_per_row;
    long k;
    if (!PyArg_ParseTuple(args, "OnKlOO", &columns, &granules, &bits_per_row, &k, &offsets_out, &rows_out))
        return NULL;
    if (check_k(k, 15, "hash_functions") < 0)
        return NULL;
    if (bits_per_row < 1 || bits_per_row > 1024) {
        PyErr_SetString(PyExc_ValueError, "bits_per_row must be in 1..1024");
        return NULL;
    }
    if (granules < 0) {
        PyErr_SetString(PyExc_ValueError, "granules must be >= 0");
        return NULL;
    }
    PyObject *seq = PySequence_Fast(columns, "columns must be a sequence of (hashes, bounds)");
    if (!seq)
        return NULL;
    Py_ssize_t ncols = PySequence_Fast_GET_SIZE(seq);
    if (ncols < 1 || ncols > MAX_INDEX_COLUMNS) {
        PyErr_Format(PyExc_ValueError, "columns: 1..%d index columns, got %zd", MAX_INDEX_COLUMNS, ncols);
        Py_DECREF(seq);
        return NULL;
    }
    Py_buffer hashes[MAX_INDEX_COLUMNS], bounds[MAX_INDEX_COLUMNS];
    Py_ssize_t ready = 0;
    PyObject *result = NULL;
    Py_buffer offs = {0}, rows = {0};
    u64set set = {0};
    u64 *scratch = NULL;
    u8 *out = NULL;
    for (; ready < ncols; ready++) {
        PyObject *item = PySequence_Fast_GET_ITEM(seq, ready);
        PyObject *h_obj, *b_obj;
        if (!PyArg_ParseTuple(item, "OO;each column must be (hashes, bounds)", &h_obj, &b_obj))
            goto done;
        if (get_u64s(h_obj, &hashes[ready], "value_hashes") < 0)
            goto done;
        if (get_bounds(b_obj, &bounds[ready], granules, hashes[ready].len / 8, "bounds") < 0) {
            PyBuffer_Release(&hashes[ready]);
            goto done;
        }
    }
    if (get_out(offsets_out, &offs, granules + 1, 8, "offsets") < 0)
        goto done;
    if (get_out(rows_out, &rows, granules, 8, "total_rows") < 0)
        goto done;
    /* One pass: each granule's distinct hashes per column go to `scratch`, the granule is sized
     * by the largest count, and its bytes are appended to a growing output buffer. */
    size_t out_cap = 1024, out_len = 0, scratch_cap = 0;
    out = PyMem_Malloc(out_cap);
    if (!out) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t g = 0; g < granules; g++) {
        size_t items = 0, max_distinct = 0, start[MAX_INDEX_COLUMNS], count[MAX_INDEX_COLUMNS];
        for (Py_ssize_t c = 0; c < ncols; c++)
            items += (size_t)(u64_at(&bounds[c], g + 1) - u64_at(&bounds[c], g));
        if (items > scratch_cap) {
            u64 *grown = PyMem_Realloc(scratch, items * sizeof(u64));
            if (!grown) {
                PyErr_NoMemory();
                goto done;
            }
            scratch = grown;
            scratch_cap = items;
        }
        size_t used = 0;
        for (Py_ssize_t c = 0; c < ncols; c++) {
            Py_ssize_t lo = (Py_ssize_t)u64_at(&bounds[c], g), hi = (Py_ssize_t)u64_at(&bounds[c], g + 1);
            if (u64set_reset(&set, (size_t)(hi - lo)) < 0) {
                PyErr_NoMemory();
                goto done;
            }
            for (Py_ssize_t i = lo; i < hi; i++)
                u64set_add(&set, u64_at(&hashes[c], i));
            if (set.count)
                memcpy(scratch + used, set.distinct, set.count * sizeof(u64));
            start[c] = used;
            count[c] = set.count;
            used += set.count;
            if (set.count > max_distinct)
                max_distinct = set.count;
        }
        size_t bytes = (size_t)((bits_per_row * max_distinct + 7) / 8);
        size_t need = out_len + varuint_size(max_distinct) + bytes * (size_t)ncols;
        if (need > out_cap) {
            while (out_cap < need)
                out_cap *= 2;
            u8 *grown = PyMem_Realloc(out, out_cap);
            if (!grown) {
                PyErr_NoMemory();
                goto done;
            }
            out = grown;
        }
        store_u64(&offs, g, out_len);
        store_u64(&rows, g, max_distinct);
        u8 *p = varuint_write(out + out_len, max_distinct);
        memset(p, 0, bytes * (size_t)ncols);
        fastmod_t fm = fastmod_init(bytes ? bytes * 8 : 1);
        for (Py_ssize_t c = 0; c < ncols; c++, p += bytes)
            for (size_t d = start[c]; d < start[c] + count[c]; d++)
                for (long j = 0; j < k; j++)
                    bit_set(p, fastmod(&fm, hash128_to_64(scratch[d], BF_HASH_SEED[j])));
        out_len = (size_t)(p - out);
    }
    store_u64(&offs, granules, out_len);
    result = PyBytes_FromStringAndSize((const char *)out, (Py_ssize_t)out_len);
done:
    for (Py_ssize_t c = 0; c < ready; c++) {
        PyBuffer_Release(&hashes[c]);
        PyBuffer_Release(&bounds[c]);
    }
    if (offs.obj)
        PyBuffer_Release(&offs);
    if (rows.obj)
        PyBuffer_Release(&rows);
    u64set_free(&set);
    PyMem_Free(scratch);
    PyMem_Free(out);
    Py_DECREF(seq);
    return result;
}

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

/* Token bytes of ClickHouse's SplitByNonAlpha tokenizer: ASCII alphanumerics and every byte
 * >= 0x80. A table lookup per byte instead of range comparisons. */
static u8 TOKEN_BYTE[256];

static void init_token_bytes(void) {
    for (int c = 0; c < 256; c++)
        TOKEN_BYTE[c] = (u8)(c >= 0x80 || (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') ||
                             (c >= 'A' && c <= 'Z'));
}

static inline int is_token_separator(u8 c) { return !TOKEN_BYTE[c]; }

static inline void pair_add_to(u8 *filter, const fastmod_t *fm, const u8 *p, size_t len, u64 seed,
                               u64 seed2, long k) {
    u64 base = city_hash64(p, len);
    u64 h1 = city_seeded_from(base, seed);
    u64 h2 = city_seeded_from(base, seed2);
    for (long j = 0; j < k; j++)
        bit_set(filter, fastmod(fm, h1 + (u64)j * h2 + (u64)j * (u64)j));
}

static inline int is_ascii(const u8 *s, size_t len) {
    u64 acc = 0;
    size_t i = 0;
    for (; i + 8 <= len; i += 8)
        acc |= load64(s + i);
    for (; i < len; i++)
        acc |= s[i];
    return (acc & 0x8080808080808080ULL) == 0;
}

/* Add every token of one string, as ClickHouse's forEachTokenToBloomFilter does. */
static void text_add_string(u8 *filter, const fastmod_t *fm, const u8 *s, size_t len, int tokenizer,
                            size_t n, u64 seed, u64 seed2, long k) {
    if (tokenizer == 0) {
        /* n-grams of n code points; the last window may be clipped at the end of the string. */
        if (len < n)
            return;
        if (is_ascii(s, len)) {
            /* Every code point is one byte: the n-grams are the byte windows. */
            for (size_t pos = 0; pos + n <= len; pos++)
                pair_add_to(filter, fm, s + pos, n, seed, seed2, k);
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
            pair_add_to(filter, fm, s + start, tlen, seed, seed2, k);
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
            pair_add_to(filter, fm, s + start, i - start, seed, seed2, k);
    }
}

/* text_granules(batch, bounds, granules, tokenizer, n, size_bytes, k, seed, out) */
static PyObject *py_text_granules(PyObject *self, PyObject *args) {
    PyObject *spec, *bounds_obj, *out;
    Py_ssize_t granules, size_bytes;
    int tokenizer;
    unsigned long long n, seed;
    long k;
    if (!PyArg_ParseTuple(args, "OOniKnlKO", &spec, &bounds_obj, &granules, &tokenizer, &n, &size_bytes, &k,
                          &seed, &out))
        return NULL;
    if (tokenizer != 0 && tokenizer != 1) {
        PyErr_SetString(PyExc_ValueError, "tokenizer must be 0 (ngram) or 1 (token)");
        return NULL;
    }
    if (tokenizer == 0 && (n < 1 || n > 1024)) {
        PyErr_SetString(PyExc_ValueError, "n must be in 1..1024");
        return NULL;
    }
    if (size_bytes < 1 || granules < 0 || check_k(k, 1 << 20, "hash_functions") < 0) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_ValueError, "size_bytes must be > 0 and granules >= 0");
        return NULL;
    }
    batch_t b;
    if (batch_parse(spec, &b) < 0)
        return NULL;
    Py_buffer bounds, v = {0};
    if (get_bounds(bounds_obj, &bounds, granules, b.count, "bounds") < 0) {
        batch_release(&b);
        return NULL;
    }
    if (granules > 0 && size_bytes > PY_SSIZE_T_MAX / granules) {
        PyErr_SetString(PyExc_ValueError, "granules * size_bytes overflows");
        goto fail;
    }
    if (get_out(out, &v, granules * size_bytes, 1, "text_granules") < 0)
        goto fail;
    memset(v.buf, 0, (size_t)(granules * size_bytes));
    fastmod_t fm = fastmod_init((u64)size_bytes * 8);
    u64 seed2 = SEED_GEN_A * seed + SEED_GEN_B;
    Py_BEGIN_ALLOW_THREADS for (Py_ssize_t g = 0; g < granules; g++) {
        u8 *filter = (u8 *)v.buf + g * size_bytes;
        Py_ssize_t lo = (Py_ssize_t)u64_at(&bounds, g), hi = (Py_ssize_t)u64_at(&bounds, g + 1);
        for (Py_ssize_t i = lo; i < hi; i++) {
            size_t len;
            const u8 *p = batch_item_at(&b, i, &len);
            text_add_string(filter, &fm, p, len, tokenizer, (size_t)n, seed, seed2, k);
        }
    }
    Py_END_ALLOW_THREADS PyBuffer_Release(&v);
    PyBuffer_Release(&bounds);
    batch_release(&b);
    Py_RETURN_NONE;
fail:
    PyBuffer_Release(&bounds);
    batch_release(&b);
    return NULL;
}

/* fastmod self-check hook for the tests: x mod d through the multiply path. */
static PyObject *py_fastmod(PyObject *self, PyObject *args) {
    unsigned long long x, d;
    if (!PyArg_ParseTuple(args, "KK", &x, &d))
        return NULL;
    if (d == 0) {
        PyErr_SetString(PyExc_ValueError, "d must be > 0");
        return NULL;
    }
    fastmod_t f = fastmod_init(d);
    return PyLong_FromUnsignedLongLong(fastmod(&f, x));
}

/* ========================================================================================== */
/* TsFile metadata scanning                                                                    */
/*                                                                                            */
/* tsfile_scan_metadata walks one serialized TsFileMetadata (format v3 or v4) and says where   */
/* its parts sit, so that testing the Bloom filter of thousands of files builds no Python      */
/* object per table root, schema or column. It checks every rule the careful Python parser     */
/* (bloomskip.tsfile.reader) checks, and validates the table root nodes in full (which Python  */
/* defers to their first use): every length is checked against the bytes that remain before   */
/* anything is read, and nothing is allocated from a length the input claims. On bad input it  */
/* raises ValueError naming the field and the file offset; bloomskip.tsfile then re-parses     */
/* with the Python reader, which raises the FormatError.                                       */
/* ========================================================================================== */

#define TS_HEAD_SIZE 7 /* "TsFile" + version byte */
#define TS_INT32_MAX 2147483647LL
#define TS_MAX_HASH_FUNCTIONS 8

typedef struct {
    const u8 *data;
    Py_ssize_t pos, end; /* the metadata is data[pos:end] */
    long long base;      /* file offset of data[0] */
    const char *field;   /* set by ts_fail */
    const char *message;
    Py_ssize_t error_pos;
} ts_cursor;

static int ts_fail(ts_cursor *c, const char *field, Py_ssize_t pos, const char *message) {
    c->field = field;
    c->message = message;
    c->error_pos = pos;
    return -1;
}

static inline Py_ssize_t ts_remaining(const ts_cursor *c) { return c->end - c->pos; }

/* LEB128 of at most 5 bytes, minimally encoded, at most `limit` (Java's readUnsignedVarInt). */
static int ts_leb128(ts_cursor *c, const char *field, u64 limit, u64 *out) {
    Py_ssize_t start = c->pos;
    u64 value = 0;
    for (int i = 0; i < 5; i++) {
        if (c->pos >= c->end)
            return ts_fail(c, field, start, "truncated varint");
        u8 byte = c->data[c->pos++];
        value |= (u64)(byte & 0x7F) << (7 * i);
        if (!(byte & 0x80)) {
            if (byte == 0 && i > 0)
                return ts_fail(c, field, start, "overlong varint (non-minimal encoding)");
            if (value > limit)
                return ts_fail(c, field, start, "varint out of range");
            *out = value;
            return 0;
        }
    }
    return ts_fail(c, field, start, "overlong varint (more than 5 bytes)");
}

static int ts_uvarint(ts_cursor *c, const char *field, long long *out) {
    u64 value;
    if (ts_leb128(c, field, (u64)TS_INT32_MAX, &value))
        return -1;
    *out = (long long)value;
    return 0;
}

/* Zig-zag varint (Java writeVarInt): 32 bits on the wire. */
static int ts_varint(ts_cursor *c, const char *field, long long *out) {
    u64 value;
    if (ts_leb128(c, field, 0xFFFFFFFFull, &value))
        return -1;
    *out = (long long)(value >> 1) ^ -(long long)(value & 1);
    return 0;
}

static int ts_take(ts_cursor *c, const char *field, long long count) {
    if (count < 0)
        return ts_fail(c, field, c->pos, "negative length");
    if (count > (long long)ts_remaining(c))
        return ts_fail(c, field, c->pos, "length runs past the end of TsFileMetadata");
    c->pos += (Py_ssize_t)count;
    return 0;
}

static int ts_i32(ts_cursor *c, const char *field, long long *out) {
    if (ts_remaining(c) < 4)
        return ts_fail(c, field, c->pos, "truncated i32");
    const u8 *p = c->data + c->pos;
    *out = (int32_t)(((u32)p[0] << 24) | ((u32)p[1] << 16) | ((u32)p[2] << 8) | (u32)p[3]);
    c->pos += 4;
    return 0;
}

static int ts_i64(ts_cursor *c, const char *field, long long *out) {
    if (ts_remaining(c) < 8)
        return ts_fail(c, field, c->pos, "truncated i64");
    u64 value = 0;
    for (int i = 0; i < 8; i++)
        value = (value << 8) | c->data[c->pos + i];
    *out = (long long)value;
    c->pos += 8;
    return 0;
}

/* Strict UTF-8, as Python's "utf-8" codec decodes it: no overlong forms, no surrogates, at most
 * U+10FFFF, no truncated sequence. */
static int ts_utf8_valid(const u8 *s, Py_ssize_t n) {
    Py_ssize_t i = 0;
    while (i < n) {
        u8 lead = s[i];
        if (lead < 0x80) {
            i++;
            continue;
        }
        Py_ssize_t need;
        u8 low = 0x80, high = 0xBF;
        if (lead >= 0xC2 && lead <= 0xDF)
            need = 1;
        else if (lead == 0xE0)
            need = 2, low = 0xA0;
        else if ((lead >= 0xE1 && lead <= 0xEC) || lead == 0xEE || lead == 0xEF)
            need = 2;
        else if (lead == 0xED)
            need = 2, high = 0x9F;
        else if (lead == 0xF0)
            need = 3, low = 0x90;
        else if (lead >= 0xF1 && lead <= 0xF3)
            need = 3;
        else if (lead == 0xF4)
            need = 3, high = 0x8F;
        else
            return 0;
        if (n - i - 1 < need || s[i + 1] < low || s[i + 1] > high)
            return 0;
        for (Py_ssize_t j = 2; j <= need; j++)
            if ((s[i + j] & 0xC0) != 0x80)
                return 0;
        i += need + 1;
    }
    return 1;
}

/* A string of `length` bytes at the cursor (length -1: null), located by start and length_out. */
static int ts_string_body(ts_cursor *c, const char *field, Py_ssize_t length_pos, long long length,
                          int nullable, Py_ssize_t *start, Py_ssize_t *length_out) {
    if (length == -1) {
        if (!nullable)
            return ts_fail(c, field, length_pos, "null string");
        *start = -1;
        *length_out = 0;
        return 0;
    }
    if (length < 0)
        return ts_fail(c, field, length_pos, "negative string length");
    Py_ssize_t begin = c->pos;
    if (ts_take(c, field, length))
        return -1;
    if (!ts_utf8_valid(c->data + begin, (Py_ssize_t)length))
        return ts_fail(c, field, length_pos, "invalid UTF-8");
    *start = begin;
    *length_out = (Py_ssize_t)length;
    return 0;
}

/* Zig-zag length + UTF-8 bytes (ReadWriteIOUtils.writeVar). */
static int ts_varstr(ts_cursor *c, const char *field, int nullable, Py_ssize_t *start,
                     Py_ssize_t *length) {
    Py_ssize_t length_pos = c->pos;
    long long value;
    if (ts_varint(c, field, &value))
        return -1;
    return ts_string_body(c, field, length_pos, value, nullable, start, length);
}

/* Big-endian i32 length + UTF-8 bytes (table schema columns). */
static int ts_i32str(ts_cursor *c, const char *field, int nullable, Py_ssize_t *start,
                     Py_ssize_t *length) {
    Py_ssize_t length_pos = c->pos;
    long long value;
    if (ts_i32(c, field, &value))
        return -1;
    return ts_string_body(c, field, length_pos, value, nullable, start, length);
}

/* An element count whose elements take at least `min_size` bytes each must fit. */
static int ts_count(ts_cursor *c, const char *field, long long min_size, int zigzag,
                    long long *out) {
    Py_ssize_t count_pos = c->pos;
    long long count;
    if (zigzag ? ts_varint(c, field, &count) : ts_uvarint(c, field, &count))
        return -1;
    if (count < 0)
        return ts_fail(c, field, count_pos, "negative count");
    if (count * min_size > (long long)ts_remaining(c))
        return ts_fail(c, field, count_pos, "count cannot fit in the bytes that remain");
    *out = count;
    return 0;
}

/* A device-level MetadataIndexNode: entries (device key, i64 child offset), i64 end offset, u8
 * type (0 or 1). Child offsets must increase strictly; *first and *last return the first child
 * offset and the end offset, which the caller checks against [meta_offset, metadata start]. */
static int ts_device_node(ts_cursor *c, int segmented, long long *first, long long *last) {
    Py_ssize_t position = c->pos;
    long long count, previous = 0, offset, type;
    Py_ssize_t start, length;
    if (ts_count(c, "index_node.entry_count", 9, 0, &count))
        return -1;
    for (long long i = 0; i < count; i++) {
        if (segmented) {
            Py_ssize_t key_pos = c->pos;
            long long segments;
            if (ts_count(c, "index_node.segment_count", 1, 0, &segments))
                return -1;
            if (segments == 0)
                return ts_fail(c, "index_node.device", key_pos, "device ID has no segments");
            for (long long s = 0; s < segments; s++)
                if (ts_varstr(c, "index_node.device", 1, &start, &length))
                    return -1;
        } else if (ts_varstr(c, "index_node.device", 0, &start, &length)) {
            return -1;
        }
        if (ts_i64(c, "index_node.offset", &offset))
            return -1;
        if (i == 0)
            *first = offset;
        else if (offset <= previous)
            return ts_fail(c, "index_node.offset", position, "child offsets out of order");
        previous = offset;
    }
    if (ts_i64(c, "index_node.end_offset", &offset))
        return -1;
    if (count == 0)
        *first = offset;
    else if (offset <= previous)
        return ts_fail(c, "index_node.end_offset", position, "end offset out of order");
    *last = offset;
    Py_ssize_t type_pos = c->pos;
    if (ts_remaining(c) < 1)
        return ts_fail(c, "index_node.type", type_pos, "truncated node type");
    type = c->data[c->pos++];
    if (type != 0 && type != 1)
        return ts_fail(c, "index_node.type", type_pos, "not a device-level node type");
    return 0;
}

/* One TableSchema: name, columns (i32-length name, data type, encoding, compressor, i32
 * property count and i32-length key/value pairs, i32 category). */
static int ts_table_schema(ts_cursor *c) {
    Py_ssize_t start, length;
    long long columns, properties, value;
    if (ts_varstr(c, "table_schema.name", 0, &start, &length))
        return -1;
    if (ts_count(c, "table_schema.column_count", 15, 0, &columns))
        return -1;
    for (long long i = 0; i < columns; i++) {
        if (ts_i32str(c, "column.name", 0, &start, &length))
            return -1;
        if (ts_take(c, "column.data_type", 3))
            return -1;
        Py_ssize_t count_pos = c->pos;
        if (ts_i32(c, "column.property_count", &properties))
            return -1;
        if (properties < 0 || properties > (long long)(ts_remaining(c) / 8))
            return ts_fail(c, "column.property_count", count_pos,
                           "property count is negative or cannot fit");
        for (long long p = 0; p < properties; p++)
            if (ts_i32str(c, "column.property_key", 1, &start, &length) ||
                ts_i32str(c, "column.property_value", 1, &start, &length))
                return -1;
        if (ts_i32(c, "column.category", &value))
            return -1;
    }
    return 0;
}

static PyObject *ts_text(const ts_cursor *c, Py_ssize_t start, Py_ssize_t length) {
    if (start < 0)
        Py_RETURN_NONE;
    return PyUnicode_DecodeUTF8((const char *)c->data + start, length, "strict");
}

/* Filter and properties, after meta_offset. Fills out[0..5]; collects the properties into the
 * dict `properties` unless it is NULL. Returns 0, -1 (format, see the cursor) or -2 (Python
 * error set). */
static int ts_filter_and_properties(ts_cursor *c, int version, long long *out,
                                    PyObject *properties) {
    out[0] = c->pos; /* filter_start */
    out[1] = c->pos; /* bits_start */
    out[2] = out[3] = out[4] = 0;
    if (version == 3 || ts_remaining(c) > 0) {
        Py_ssize_t length_pos = c->pos;
        long long byte_length, bit_count, k;
        if (ts_uvarint(c, "bloom_filter.byte_length", &byte_length))
            return -1;
        if (byte_length > (long long)ts_remaining(c))
            return ts_fail(c, "bloom_filter.bits", c->pos,
                           "bit vector crosses the TsFileMetadata boundary");
        out[1] = c->pos;
        c->pos += (Py_ssize_t)byte_length;
        if (byte_length > 0 || version == 3) {
            Py_ssize_t count_pos = c->pos;
            if (ts_uvarint(c, "bloom_filter.bit_count", &bit_count))
                return -1;
            Py_ssize_t hash_pos = c->pos;
            if (ts_uvarint(c, "bloom_filter.hash_function_count", &k))
                return -1;
            if (byte_length > 0) {
                if (bit_count <= 0)
                    return ts_fail(c, "bloom_filter.bit_count", count_pos, "bit_count is 0");
                if (k < 1 || k > TS_MAX_HASH_FUNCTIONS)
                    return ts_fail(c, "bloom_filter.hash_function_count", hash_pos,
                                   "hash_function_count is not in 1..8");
                if (byte_length > (bit_count + 7) / 8)
                    return ts_fail(c, "bloom_filter.byte_length", length_pos,
                                   "byte_length exceeds ceil(bit_count / 8)");
                out[2] = byte_length;
                out[3] = bit_count;
                out[4] = k;
            }
        }
    }
    out[5] = c->pos; /* filter_end */
    if (version >= 4 && ts_remaining(c) > 0) {
        long long count;
        if (ts_count(c, "property_count", 2, 1, &count))
            return -1;
        for (long long i = 0; i < count; i++) {
            Py_ssize_t key_start, key_length, value_start, value_length;
            if (ts_varstr(c, "property_key", 1, &key_start, &key_length) ||
                ts_varstr(c, "property_value", 1, &value_start, &value_length))
                return -1;
            if (!properties)
                continue;
            PyObject *key = key_start < 0 ? PyUnicode_FromStringAndSize("", 0)
                                          : ts_text(c, key_start, key_length);
            PyObject *value = key ? ts_text(c, value_start, value_length) : NULL;
            int failed = !value || PyDict_SetItem(properties, key, value) < 0;
            Py_XDECREF(key);
            Py_XDECREF(value);
            if (failed)
                return -2;
        }
    }
    if (ts_remaining(c) > 0)
        return ts_fail(c, "TsFileMetadata end", c->pos, "unexpected bytes after the metadata");
    return 0;
}

/* Where the parts of a TsFileMetadata are (positions index the scanned buffer). */
typedef struct {
    Py_ssize_t schema_start;
    long long schema_count, meta_offset;
    long long filter[6]; /* filter_start, bits_start, byte_length, bit_count, k, filter_end */
} ts_layout;

/* Scan the TsFileMetadata at c->pos .. c->end (version 3 or 4). Appends (name, root position) to
 * `tables` and fills `properties` unless they are NULL. Returns 0, -1 (format error, see the
 * cursor) or -2 (Python error set). */
static int ts_scan(ts_cursor *c, int version, PyObject *tables, PyObject *properties,
                   ts_layout *layout) {
    long long first_child = LLONG_MAX, last_child = LLONG_MIN, table_count = 1;
    Py_ssize_t metadata_pos = c->pos, first_child_pos = c->pos, last_child_pos = c->pos;
    layout->schema_count = 0;
    if (version >= 4 && ts_count(c, "table_count", 3, 0, &table_count))
        return -1;
    for (long long i = 0; i < table_count; i++) {
        Py_ssize_t name_start = 0, name_length = 0;
        if (version >= 4 && ts_varstr(c, "table_name", 0, &name_start, &name_length))
            return -1;
        Py_ssize_t root = c->pos;
        long long first, last;
        if (ts_device_node(c, version >= 4, &first, &last))
            return -1;
        if (first < first_child)
            first_child = first, first_child_pos = root;
        if (last > last_child)
            last_child = last, last_child_pos = root;
        if (!tables)
            continue;
        PyObject *name = ts_text(c, name_start, name_length);
        PyObject *entry = name ? Py_BuildValue("(Nn)", name, root) : NULL;
        int failed = !entry || PyList_Append(tables, entry) < 0;
        Py_XDECREF(entry);
        if (failed)
            return -2;
    }
    layout->schema_start = c->pos;
    if (version >= 4) {
        if (ts_count(c, "table_schema_count", 2, 0, &layout->schema_count))
            return -1;
        layout->schema_start = c->pos;
        for (long long i = 0; i < layout->schema_count; i++)
            if (ts_table_schema(c))
                return -1;
    }
    Py_ssize_t meta_pos = c->pos;
    if (ts_i64(c, "meta_offset", &layout->meta_offset))
        return -1;
    long long metadata_start = c->base + metadata_pos;
    if (layout->meta_offset < TS_HEAD_SIZE || layout->meta_offset > metadata_start)
        return ts_fail(c, "meta_offset", meta_pos,
                       "meta_offset is not between the head and TsFileMetadata");
    /* Children precede their parent: a root's children lie in [meta_offset, metadata start]. */
    if (table_count > 0 && first_child < layout->meta_offset)
        return ts_fail(c, "index_node.offset", first_child_pos, "child offset before meta_offset");
    if (table_count > 0 && last_child > metadata_start)
        return ts_fail(c, "index_node.end_offset", last_child_pos,
                       "child offset inside or after TsFileMetadata");
    return ts_filter_and_properties(c, version, layout->filter, properties);
}

/* tsfile_scan_metadata(data, start, end, version, base) -> (tables, schema_start,
 * schema_count, meta_offset, filter_start, bits_start, byte_length, bit_count, k, filter_end,
 * properties). data[start:end] is TsFileMetadata, data[0] sits at file offset base; returned
 * positions index data. tables lists (table name, root node position); byte_length, bit_count
 * and k are 0 when the file has no filter. v3 has one table named "" and no schemas or
 * properties. */
static PyObject *py_tsfile_scan_metadata(PyObject *self, PyObject *args) {
    Py_buffer view;
    Py_ssize_t start, end;
    int version;
    long long base;
    if (!PyArg_ParseTuple(args, "y*nniL", &view, &start, &end, &version, &base))
        return NULL;
    PyObject *tables = NULL, *properties = NULL, *result = NULL;
    if (start < 0 || end < start || end > view.len || (version != 3 && version != 4) ||
        base < 0 || base > (long long)1 << 62) {
        PyErr_SetString(PyExc_ValueError, "bad arguments: need 0 <= start <= end <= len(data), "
                                          "version 3 or 4, 0 <= base < 2**62");
        goto done;
    }
    tables = PyList_New(0);
    properties = PyDict_New();
    if (!tables || !properties)
        goto done;
    ts_cursor c = {.data = (const u8 *)view.buf, .pos = start, .end = end, .base = base};
    ts_layout layout;
    int status = ts_scan(&c, version, tables, properties, &layout);
    if (status == -1)
        PyErr_Format(PyExc_ValueError, "TsFileMetadata field %s at offset %lld: %s", c.field,
                     base + (long long)c.error_pos, c.message);
    if (status == 0)
        result = Py_BuildValue("(OnLLLLLLLLO)", tables, layout.schema_start, layout.schema_count,
                               layout.meta_offset, layout.filter[0], layout.filter[1],
                               layout.filter[2], layout.filter[3], layout.filter[4],
                               layout.filter[5], properties);
done:
    Py_XDECREF(tables);
    Py_XDECREF(properties);
    PyBuffer_Release(&view);
    return result;
}

/* tsfile_index_node(data, pos, key_kind, floor, limit, base) -> (keys, offsets, end_offset,
 * node_type, end_pos): one MetadataIndexNode at data[pos:], parsed with the rules of the Python
 * reader's _parse_node. key_kind 0: measurement level (keys are names), 1: v3 device level (keys
 * are 1-tuples), 2: v4 device level (keys are tuples of segments, None for a null segment).
 * Child offsets and the end offset must increase strictly within [floor, limit]. data[0] sits
 * at file offset base (for error offsets). */
static PyObject *py_tsfile_index_node(PyObject *self, PyObject *args) {
    Py_buffer view;
    Py_ssize_t pos;
    int kind;
    long long floor_offset, limit, base;
    if (!PyArg_ParseTuple(args, "y*niLLL", &view, &pos, &kind, &floor_offset, &limit, &base))
        return NULL;
    PyObject *keys = NULL, *offsets = NULL, *result = NULL;
    if (pos < 0 || pos > view.len || kind < 0 || kind > 2 || base < 0 ||
        base > (long long)1 << 62) {
        PyErr_SetString(PyExc_ValueError, "bad arguments: need 0 <= pos <= len(data), "
                                          "key_kind 0..2, 0 <= base < 2**62");
        goto done;
    }
    ts_cursor c = {.data = (const u8 *)view.buf, .pos = pos, .end = view.len, .base = base};
    const char *key_field = kind ? "index_node.device" : "index_node.measurement";
    long long count, previous = floor_offset, offset, node_type;
    Py_ssize_t start, length;
    if (ts_count(&c, "index_node.entry_count", 9, 0, &count))
        goto format_error;
    keys = PyTuple_New((Py_ssize_t)count);
    offsets = PyTuple_New((Py_ssize_t)count);
    if (!keys || !offsets)
        goto done;
    for (long long i = 0; i <= count; i++) {
        if (i < count) {
            PyObject *key;
            if (kind == 2) {
                Py_ssize_t key_pos = c.pos;
                long long segments;
                if (ts_count(&c, "index_node.segment_count", 1, 0, &segments))
                    goto format_error;
                if (segments == 0) {
                    ts_fail(&c, key_field, key_pos, "device ID has no segments");
                    goto format_error;
                }
                key = PyTuple_New((Py_ssize_t)segments);
                if (!key)
                    goto done;
                PyTuple_SET_ITEM(keys, (Py_ssize_t)i, key);
                for (long long s = 0; s < segments; s++) {
                    if (ts_varstr(&c, key_field, 1, &start, &length))
                        goto format_error;
                    PyObject *segment = ts_text(&c, start, length);
                    if (!segment)
                        goto done;
                    PyTuple_SET_ITEM(key, (Py_ssize_t)s, segment);
                }
            } else {
                if (ts_varstr(&c, key_field, 0, &start, &length))
                    goto format_error;
                PyObject *name = ts_text(&c, start, length);
                key = name && kind == 1 ? PyTuple_Pack(1, name) : name;
                if (kind == 1)
                    Py_XDECREF(name);
                if (!key)
                    goto done;
                PyTuple_SET_ITEM(keys, (Py_ssize_t)i, key);
            }
        }
        Py_ssize_t offset_pos = c.pos;
        if (ts_i64(&c, i < count ? "index_node.offset" : "index_node.end_offset", &offset))
            goto format_error;
        /* The first bound may equal floor; the following ones must increase strictly. */
        if (offset < previous || (i > 0 && offset == previous) || offset > limit) {
            ts_fail(&c, i < count ? "index_node.offset" : "index_node.end_offset", offset_pos,
                    "child offset is out of order or outside [floor, limit]");
            goto format_error;
        }
        previous = offset;
        if (i < count) {
            PyObject *number = PyLong_FromLongLong(offset);
            if (!number)
                goto done;
            PyTuple_SET_ITEM(offsets, (Py_ssize_t)i, number);
        }
    }
    Py_ssize_t type_pos = c.pos;
    if (ts_remaining(&c) < 1) {
        ts_fail(&c, "index_node.type", type_pos, "truncated node type");
        goto format_error;
    }
    node_type = c.data[c.pos++];
    if (kind ? node_type > 1 : (node_type < 2 || node_type > 3)) {
        ts_fail(&c, "index_node.type", type_pos, "node type of the wrong level");
        goto format_error;
    }
    result = Py_BuildValue("(OOLLn)", keys, offsets, previous, node_type, c.pos);
    goto done;
format_error:
    PyErr_Format(PyExc_ValueError, "MetadataIndexNode field %s at offset %lld: %s", c.field,
                 base + (long long)c.error_pos, c.message);
done:
    Py_XDECREF(keys);
    Py_XDECREF(offsets);
    PyBuffer_Release(&view);
    return result;
}

/* tsfile_tail_verdict(tail, head, size, path, signed_tails) -> int: test a series path against
 * the Bloom filter of a file from its last bytes alone (find over thousands of files). tail is
 * the last len(tail) bytes of a file of `size` bytes, head its first 7 bytes (or more). The path
 * is hashed with each tail variant of signed_tails (a sequence of bools) by the same kernels as
 * bloomskip.bits. Returns 0 when the filter rules the path out under every variant, 1 when it
 * may hold it, and -1 when the caller must read the file itself: no filter, a metadata larger
 * than the tail, or anything malformed (the Python reader then names the problem). */
static PyObject *py_tsfile_tail_verdict(PyObject *self, PyObject *args) {
    Py_buffer tail, head, path;
    long long size;
    PyObject *variants;
    if (!PyArg_ParseTuple(args, "y*y*Ly*O", &tail, &head, &size, &path, &variants))
        return NULL;
    long verdict = -1;
    int signed_tails[2], variant_count = 0;
    PyObject *sequence = PySequence_Fast(variants, "signed_tails must be a sequence of bools");
    if (!sequence)
        goto fail;
    if (PySequence_Fast_GET_SIZE(sequence) < 1 || PySequence_Fast_GET_SIZE(sequence) > 2) {
        Py_DECREF(sequence);
        PyErr_SetString(PyExc_ValueError, "signed_tails must hold one or two variants");
        goto fail;
    }
    for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(sequence); i++) {
        int flag = PyObject_IsTrue(PySequence_Fast_GET_ITEM(sequence, i));
        if (flag < 0) {
            Py_DECREF(sequence);
            goto fail;
        }
        signed_tails[variant_count++] = flag;
    }
    Py_DECREF(sequence);
    const u8 *t = (const u8 *)tail.buf, *h = (const u8 *)head.buf;
    Py_ssize_t tail_length = tail.len;
    /* The envelope: both magics, the version, a metadata size that fits and lies in the tail. */
    if (size < TS_HEAD_SIZE + 10 || size > (long long)1 << 62 || tail_length < 10 ||
        tail_length > size || head.len < TS_HEAD_SIZE || memcmp(h, "TsFile", 6) != 0 ||
        (h[6] != 3 && h[6] != 4) || memcmp(t + tail_length - 6, "TsFile", 6) != 0)
        goto answer;
    long long tail_start = size - tail_length;
    const u8 *size_bytes = t + tail_length - 10;
    long long metadata_size = (int32_t)(((u32)size_bytes[0] << 24) | ((u32)size_bytes[1] << 16) |
                                        ((u32)size_bytes[2] << 8) | (u32)size_bytes[3]);
    long long metadata_end = size - 10, metadata_start = metadata_end - metadata_size;
    if (metadata_size < 0 || metadata_start < TS_HEAD_SIZE || metadata_start < tail_start)
        goto answer;
    ts_cursor c = {.data = t, .pos = (Py_ssize_t)(metadata_start - tail_start),
                   .end = (Py_ssize_t)(metadata_end - tail_start), .base = tail_start};
    ts_layout layout;
    if (ts_scan(&c, h[6], NULL, NULL, &layout) != 0 || layout.filter[2] == 0)
        goto answer;
    {
        const u8 *bits = t + layout.filter[1];
        long long byte_length = layout.filter[2], bit_count = layout.filter[3];
        long long k = layout.filter[4];
        verdict = 0;
        for (int v = 0; v < variant_count && !verdict; v++) {
            int hit = 1;
            for (long long j = 0; j < k && hit; j++) {
                u64 position = tsfile_index(tsfile_hash32((const u8 *)path.buf, (size_t)path.len,
                                                          TSFILE_SEEDS[j], signed_tails[v]),
                                            (u64)bit_count);
                hit = (long long)(position >> 3) < byte_length &&
                      (bits[position >> 3] >> (position & 7)) & 1;
            }
            verdict = hit;
        }
    }
answer:
    PyBuffer_Release(&tail);
    PyBuffer_Release(&head);
    PyBuffer_Release(&path);
    return PyLong_FromLong(verdict);
fail:
    PyBuffer_Release(&tail);
    PyBuffer_Release(&head);
    PyBuffer_Release(&path);
    return NULL;
}

/* ========================================================================================== */
/* End of TsFile metadata scanning                                                             */
/* ========================================================================================== */

static PyMethodDef methods[] = {
    {"murmur3_128", py_murmur3_128, METH_VARARGS, "murmur3_128(data, seed) -> (h1, h2)"},
    {"tsfile_hash32", py_tsfile_hash32, METH_VARARGS, "tsfile_hash32(data, seed, signed_tail) -> int"},
    {"cityhash64", py_cityhash64, METH_VARARGS, "cityhash64(data) -> int"},
    {"cityhash64_with_seed", py_cityhash64_with_seed, METH_VARARGS, "cityhash64_with_seed(data, seed)"},
    {"cityhash128", py_cityhash128, METH_VARARGS, "cityhash128(data) -> (low64, high64)"},
    {"hash128_to_64", py_hash128_to_64, METH_VARARGS, "hash128_to_64(low, high) -> int"},
    {"int_hash64", py_int_hash64, METH_VARARGS, "int_hash64(x) -> int"},
    {"hash_batch", py_hash_batch, METH_VARARGS, NULL},
    {"hash128_to_64_array", py_hash128_to_64_array, METH_VARARGS, NULL},
    {"int_hash64_array", py_int_hash64_array, METH_VARARGS, NULL},
    {"set_bits", py_set_bits, METH_VARARGS, NULL},
    {"test_bits", py_test_bits, METH_VARARGS, NULL},
    {"popcount", py_popcount, METH_VARARGS, NULL},
    {"popcount_rows", py_popcount_rows, METH_VARARGS, NULL},
    {"union_into", py_union_into, METH_VARARGS, NULL},
    {"covers", py_covers, METH_VARARGS, NULL},
    {"covers_rows", py_covers_rows, METH_VARARGS, NULL},
    {"tsfile_op", py_tsfile_op, METH_VARARGS, NULL},
    {"seeded_op", py_seeded_op, METH_VARARGS, NULL},
    {"pair_op", py_pair_op, METH_VARARGS, NULL},
    {"bloom_filter_granules", py_bloom_filter_granules, METH_VARARGS, NULL},
    {"text_granules", py_text_granules, METH_VARARGS, NULL},
    {"fastmod", py_fastmod, METH_VARARGS, NULL},
    /* TsFile metadata scanning */
    {"tsfile_scan_metadata", py_tsfile_scan_metadata, METH_VARARGS, NULL},
    {"tsfile_index_node", py_tsfile_index_node, METH_VARARGS, NULL},
    {"tsfile_tail_verdict", py_tsfile_tail_verdict, METH_VARARGS, NULL},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {
    .m_base = PyModuleDef_HEAD_INIT,
    .m_name = "bloomskip._native",
    .m_doc = "C kernels of bloomskip (see bloomskip.hashing, bloomskip.bits).",
    .m_size = -1,
    .m_methods = methods,
};

PyMODINIT_FUNC PyInit__native(void) {
    const u32 probe = 1;
    if (*(const u8 *)&probe != 1) {
        PyErr_SetString(PyExc_ImportError, "bloomskip's kernels need a little-endian host");
        return NULL;
    }
    init_token_bytes();
    return PyModule_Create(&module);
}
