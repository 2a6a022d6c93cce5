/*
 * Bitsets and the bit-position schemes: TsFile's (abs(hash32) mod bit_count over eight seeds),
 * ClickHouse bloom_filter's (Hash128to64 with fifteen seeds) and ClickHouse ngrambf_v1 /
 * tokenbf_v1's (h1 + i*h2 + i*i over two seeded CityHash64 values), and Parquet's split-block
 * Bloom filter (eight salted bits in one 32-byte block per XXH64 hash).
 */
#ifndef BLOOMSKIP_BITS_H
#define BLOOMSKIP_BITS_H

#include "hash.h"

/* What a scheme entry point does with the positions of each item, exported to Python as OP_*:
 * write them out (n*k), set them in the bitset, or test that all k are set (n flags). */
enum { OP_POSITIONS, OP_ADD, OP_CONTAINS };

/* ClickHouse's BloomFilterHash seeds (bloom_filter index). */
static const u64 BF_HASH_SEED[15] = {
    13635471485423070496ULL, 10336109063487487899ULL, 17779957404565211594ULL,
    8988612159822229247ULL,  4954614162757618085ULL,  12980113590177089081ULL,
    9263883436177860930ULL,  3656772712723269762ULL,  10362091744962961274ULL,
    7582936617938287249ULL,  15033938188484401405ULL, 18286745649494826751ULL,
    6852245486148412312ULL,  8886056245089344681ULL,  10151472371158292780ULL};

/* The second seed of the text indexes: SEED_GEN_A * seed + SEED_GEN_B. */
#define SEED_GEN_A 845897321ULL
#define SEED_GEN_B 217728422ULL

/* ClickHouse ngrambf/tokenbf: pos_i = (h1 + i*h2 + i*i) mod 2^64 mod bit_count. */
static inline void pair_hashes(const u8 *p, size_t len, u64 seed, u64 *h1, u64 *h2) {
    u64 base = city_hash64(p, len);
    *h1 = city_seeded_from(base, seed);
    *h2 = city_seeded_from(base, SEED_GEN_A * seed + SEED_GEN_B);
}

/* Add one token to a text-index filter; seed2 is the precomputed second seed. */
static inline void pair_add_to(u8 *filter, const fastmod_t *fm, const u8 *p, size_t len, u64 seed,
                               u64 seed2, long k) {
    u64 base = city_hash64(p, len);
    u64 h1 = city_seeded_from(base, seed);
    u64 h2 = city_seeded_from(base, seed2);
    for (long j = 0; j < k; j++)
        bit_set(filter, fastmod(fm, h1 + (u64)j * h2 + (u64)j * (u64)j));
}

PyObject *py_set_bits(PyObject *self, PyObject *args);
PyObject *py_test_bits(PyObject *self, PyObject *args);
PyObject *py_popcount(PyObject *self, PyObject *args);
PyObject *py_popcount_rows(PyObject *self, PyObject *args);
PyObject *py_union_into(PyObject *self, PyObject *args);
PyObject *py_covers(PyObject *self, PyObject *args);
PyObject *py_covers_rows(PyObject *self, PyObject *args);
PyObject *py_tsfile_op(PyObject *self, PyObject *args);
PyObject *py_seeded_op(PyObject *self, PyObject *args);
PyObject *py_pair_op(PyObject *self, PyObject *args);
PyObject *py_fastmod(PyObject *self, PyObject *args);
PyObject *py_sbbf_op(PyObject *self, PyObject *args);

#endif
