/* Python entry points of the bitsets and the bit-position schemes (see bits.h). */
#include "bits.h"

#include "batch.h"

PyObject *py_set_bits(PyObject *self, PyObject *args) {
    PyObject *bits_obj, *pos_obj;
    if (!PyArg_ParseTuple(args, "OO", &bits_obj, &pos_obj))
        return NULL;
    HELD(held, 4);
    Py_buffer *bits, *pos;
    if (!(bits = held_acquire(&held, bits_obj, PyBUF_WRITABLE)) ||
        !(pos = held_u64s(&held, pos_obj, "positions")))
        return held_release(&held, NULL);
    Py_ssize_t n = pos->len / 8;
    u64 limit = (u64)bits->len * 8;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (u64_at(pos, i) >= limit) {
            PyErr_Format(PyExc_ValueError, "positions: %llu is outside the %llu-bit bitset",
                         (unsigned long long)u64_at(pos, i), (unsigned long long)limit);
            return held_release(&held, NULL);
        }
    }
    for (Py_ssize_t i = 0; i < n; i++)
        bit_set((u8 *)bits->buf, u64_at(pos, i));
    return held_release_none(&held);
}

PyObject *py_test_bits(PyObject *self, PyObject *args) {
    PyObject *bits_obj, *pos_obj, *out;
    if (!PyArg_ParseTuple(args, "OOO", &bits_obj, &pos_obj, &out))
        return NULL;
    HELD(held, 4);
    Py_buffer *bits, *pos, *v;
    if (!(bits = held_acquire(&held, bits_obj, PyBUF_SIMPLE)) ||
        !(pos = held_u64s(&held, pos_obj, "positions")) ||
        !(v = held_out(&held, out, pos->len / 8, 1, "test_bits")))
        return held_release(&held, NULL);
    Py_ssize_t n = pos->len / 8;
    for (Py_ssize_t i = 0; i < n; i++)
        ((u8 *)v->buf)[i] = (u8)bit_get((const u8 *)bits->buf, bits->len, u64_at(pos, i));
    return held_release_none(&held);
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

PyObject *py_popcount(PyObject *self, PyObject *args) {
    Py_buffer bits;
    if (!PyArg_ParseTuple(args, "y*", &bits))
        return NULL;
    u64 total = popcount_bytes((const u8 *)bits.buf, bits.len);
    PyBuffer_Release(&bits);
    return PyLong_FromUnsignedLongLong(total);
}

/* Popcount of each row of a (rows, width) byte matrix. */
PyObject *py_popcount_rows(PyObject *self, PyObject *args) {
    HELD(held, 4);
    Py_buffer *m = &held.view[0], *v;
    Py_ssize_t width;
    PyObject *out;
    if (!PyArg_ParseTuple(args, "y*nO", m, &width, &out))
        return NULL;
    held.count = 1;
    if (width <= 0 || m->len % width != 0) {
        PyErr_SetString(PyExc_ValueError, "popcount_rows: width must divide the matrix length");
        return held_release(&held, NULL);
    }
    Py_ssize_t rows = m->len / width;
    if (!(v = held_out(&held, out, rows, 8, "popcount_rows")))
        return held_release(&held, NULL);
    for (Py_ssize_t r = 0; r < rows; r++)
        store_u64(v, r, popcount_bytes((const u8 *)m->buf + r * width, width));
    return held_release_none(&held);
}

PyObject *py_union_into(PyObject *self, PyObject *args) {
    PyObject *dst_obj;
    HELD(held, 4);
    Py_buffer *src = &held.view[0], *dst;
    if (!PyArg_ParseTuple(args, "Oy*", &dst_obj, src))
        return NULL;
    held.count = 1;
    if (!(dst = held_acquire(&held, dst_obj, PyBUF_WRITABLE)))
        return held_release(&held, NULL);
    if (dst->len != src->len) {
        PyErr_Format(PyExc_ValueError, "bitsets differ in length: %zd and %zd bytes", dst->len,
                     src->len);
        return held_release(&held, NULL);
    }
    u8 *d = (u8 *)dst->buf;
    const u8 *s = (const u8 *)src->buf;
    for (Py_ssize_t i = 0; i < dst->len; i++)
        d[i] |= s[i];
    return held_release_none(&held);
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

PyObject *py_covers(PyObject *self, PyObject *args) {
    HELD(held, 4);
    Py_buffer *a = &held.view[0], *b = &held.view[1];
    if (!PyArg_ParseTuple(args, "y*y*", a, b))
        return NULL;
    held.count = 2;
    if (a->len != b->len) {
        PyErr_Format(PyExc_ValueError, "bitsets differ in length: %zd and %zd bytes", a->len,
                     b->len);
        return held_release(&held, NULL);
    }
    int r = covers_bytes((const u8 *)a->buf, (const u8 *)b->buf, a->len);
    return held_release(&held, PyBool_FromLong(r));
}

PyObject *py_covers_rows(PyObject *self, PyObject *args) {
    HELD(held, 4);
    Py_buffer *m = &held.view[0], *q = &held.view[1], *v;
    PyObject *out;
    if (!PyArg_ParseTuple(args, "y*y*O", m, q, &out))
        return NULL;
    held.count = 2;
    Py_ssize_t width = q->len;
    if (width <= 0 || m->len % width != 0) {
        PyErr_Format(PyExc_ValueError,
                     "covers_rows: a %zd-byte query does not divide the %zd-byte matrix", width,
                     m->len);
        return held_release(&held, NULL);
    }
    Py_ssize_t rows = m->len / width;
    if (!(v = held_out(&held, out, rows, 1, "covers_rows")))
        return held_release(&held, NULL);
    const u8 *mb = (const u8 *)m->buf, *qb = (const u8 *)q->buf;
    u8 *flags = (u8 *)v->buf;
    Py_BEGIN_ALLOW_THREADS for (Py_ssize_t r = 0; r < rows; r++) flags[r] =
        (u8)covers_bytes(mb + r * width, qb, width);
    Py_END_ALLOW_THREADS return held_release_none(&held);
}

static int check_op(int op, int last) {
    if (op < OP_POSITIONS || op > last) {
        PyErr_Format(PyExc_ValueError, "unknown op %d", op);
        return -1;
    }
    return 0;
}

/* The bitset of a scheme entry point: writable for OP_ADD, and at least ceil(bit_count / 8)
 * bytes where `sized` (a shorter one reads as zeros past its end). */
static Py_buffer *held_bitset(held_t *held, PyObject *obj, int op, int sized,
                              unsigned long long bit_count) {
    Py_buffer *bits = held_acquire(held, obj, op == OP_ADD ? PyBUF_WRITABLE : PyBUF_SIMPLE);
    if (bits && sized && (u64)bits->len < (bit_count + 7) / 8) {
        PyErr_Format(PyExc_ValueError, "bitset of %zd bytes is shorter than bit_count %llu",
                     bits->len, bit_count);
        return NULL;
    }
    return bits;
}

/* tsfile_op(op, bitset, batch, bit_count, k, signed_tail, out): OP_POSITIONS writes positions to
 * out (n*k i64), OP_ADD sets bits, OP_CONTAINS tests all k bits into out (n bytes). */
PyObject *py_tsfile_op(PyObject *self, PyObject *args) {
    int op, signed_tail;
    PyObject *bits_obj, *spec, *out;
    unsigned long long bit_count;
    long k;
    if (!PyArg_ParseTuple(args, "iOOKlpO", &op, &bits_obj, &spec, &bit_count, &k, &signed_tail, &out))
        return NULL;
    if (check_op(op, OP_CONTAINS) < 0 || check_bit_count(bit_count) < 0 ||
        check_k(k, 8, "hash_function_count") < 0)
        return NULL;
    HELD(held, 4);
    batch_t b;
    Py_buffer *bits = NULL, *v = NULL;
    if (held_batch(&held, spec, &b) < 0 ||
        (op != OP_POSITIONS && !(bits = held_bitset(&held, bits_obj, op, op == OP_ADD, bit_count))) ||
        (op != OP_ADD && !(v = held_out(&held, out, op == OP_POSITIONS ? b.count * k : b.count,
                                        op == OP_POSITIONS ? 8 : 1, "tsfile"))))
        return held_release(&held, NULL);
    u8 *bitset = bits ? (u8 *)bits->buf : NULL, *dst = v ? (u8 *)v->buf : NULL;
    Py_ssize_t bitset_len = bits ? bits->len : 0;
    Py_BEGIN_ALLOW_THREADS FOR_EACH_ITEM(b, {
        int hit = 1;
        for (long j = 0; j < k; j++) {
            u64 pos = tsfile_index(tsfile_hash32(p, len, TSFILE_SEEDS[j], signed_tail), bit_count);
            if (op == OP_POSITIONS) {
                int64_t sp = (int64_t)pos;
                memcpy(dst + 8 * (i * k + j), &sp, 8);
            } else if (op == OP_ADD) {
                bit_set(bitset, pos);
            } else if (!bit_get(bitset, bitset_len, pos)) {
                hit = 0;
                break;
            }
        }
        if (op == OP_CONTAINS)
            dst[i] = (u8)hit;
    });
    Py_END_ALLOW_THREADS return held_release_none(&held);
}

/* seeded_op(op, bitset, hashes, bit_count, k, out): ClickHouse bloom_filter,
 * pos_i = Hash128to64(h, BF_HASH_SEED[i]) mod bit_count; ops as in tsfile_op (u64 positions). */
PyObject *py_seeded_op(PyObject *self, PyObject *args) {
    int op;
    PyObject *bits_obj, *hashes_obj, *out;
    unsigned long long bit_count;
    long k;
    if (!PyArg_ParseTuple(args, "iOOKlO", &op, &bits_obj, &hashes_obj, &bit_count, &k, &out))
        return NULL;
    if (check_op(op, OP_CONTAINS) < 0 || check_bit_count(bit_count) < 0 ||
        check_k(k, 15, "hash_functions") < 0)
        return NULL;
    HELD(held, 4);
    Py_buffer *h, *bits = NULL, *v = NULL;
    if (!(h = held_u64s(&held, hashes_obj, "value_hashes")) ||
        (op != OP_POSITIONS && !(bits = held_bitset(&held, bits_obj, op, 1, bit_count))) ||
        (op != OP_ADD && !(v = held_out(&held, out, op == OP_POSITIONS ? h->len / 8 * k : h->len / 8,
                                        op == OP_POSITIONS ? 8 : 1, "seeded"))))
        return held_release(&held, NULL);
    Py_ssize_t n = h->len / 8;
    u8 *bitset = bits ? (u8 *)bits->buf : NULL;
    Py_ssize_t bitset_len = bits ? bits->len : 0;
    fastmod_t fm = fastmod_init(bit_count);
    for (Py_ssize_t i = 0; i < n; i++) {
        u64 x = u64_at(h, i);
        int hit = 1;
        for (long j = 0; j < k; j++) {
            u64 pos = fastmod(&fm, hash128_to_64(x, BF_HASH_SEED[j]));
            if (op == OP_POSITIONS)
                store_u64(v, i * k + j, pos);
            else if (op == OP_ADD)
                bit_set(bitset, pos);
            else if (!bit_get(bitset, bitset_len, pos)) {
                hit = 0;
                break;
            }
        }
        if (op == OP_CONTAINS)
            ((u8 *)v->buf)[i] = (u8)hit;
    }
    return held_release_none(&held);
}

/* pair_op(op, bitset, batch, seed, bit_count, k, out): ClickHouse ngrambf/tokenbf positions
 * (OP_POSITIONS, n*k u64 into out) or OP_ADD into the bitset. */
PyObject *py_pair_op(PyObject *self, PyObject *args) {
    int op;
    PyObject *bits_obj, *spec, *out;
    unsigned long long seed, bit_count;
    long k;
    if (!PyArg_ParseTuple(args, "iOOKKlO", &op, &bits_obj, &spec, &seed, &bit_count, &k, &out))
        return NULL;
    if (check_op(op, OP_ADD) < 0 || check_bit_count(bit_count) < 0 ||
        check_k(k, 1 << 20, "hash_functions") < 0)
        return NULL;
    HELD(held, 4);
    batch_t b;
    Py_buffer *bits = NULL, *v = NULL;
    if (held_batch(&held, spec, &b) < 0 ||
        (op == OP_ADD ? !(bits = held_bitset(&held, bits_obj, op, 1, bit_count))
                      : !(v = held_out(&held, out, b.count * k, 8, "pair_positions"))))
        return held_release(&held, NULL);
    u8 *bitset = bits ? (u8 *)bits->buf : NULL;
    fastmod_t fm = fastmod_init(bit_count);
    Py_BEGIN_ALLOW_THREADS FOR_EACH_ITEM(b, {
        u64 h1, h2;
        pair_hashes(p, len, seed, &h1, &h2);
        for (long j = 0; j < k; j++) {
            u64 pos = fastmod(&fm, h1 + (u64)j * h2 + (u64)j * (u64)j);
            if (op == OP_ADD)
                bit_set(bitset, pos);
            else
                store_u64(v, i * k + j, pos);
        }
    });
    Py_END_ALLOW_THREADS return held_release_none(&held);
}

/* fastmod self-check hook for the tests: x mod d through the multiply path. */
PyObject *py_fastmod(PyObject *self, PyObject *args) {
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

/* Parquet's split-block Bloom filter (parquet-format BloomFilter.md): 32-byte blocks of eight
 * little-endian 32-bit words. The upper half of a value's XXH64 picks the block,
 * ((hash >> 32) * blocks) >> 32; the lower half, multiplied by each word's salt, keeps its top
 * five bits as the one bit it sets (or tests) in that word. */
static const u32 SBBF_SALT[8] = {0x47b6137bU, 0x44974d91U, 0x8824ad5bU, 0xa2b7289dU,
                                 0x705495c7U, 0x2df1424bU, 0x9efc4947U, 0x5c6bfb31U};

/* sbbf_op(op, bitset, hashes, out): OP_ADD sets each XXH64 hash's eight bits in bitset;
 * OP_CONTAINS writes out[i] = 1 when all eight bits of hash i are set. The bitset is a whole
 * number of 32-byte blocks (checked: 1 .. 2^32 blocks). */
PyObject *py_sbbf_op(PyObject *self, PyObject *args) {
    int op;
    PyObject *bits_obj, *hashes_obj, *out;
    if (!PyArg_ParseTuple(args, "iOOO", &op, &bits_obj, &hashes_obj, &out))
        return NULL;
    if (op != OP_ADD && op != OP_CONTAINS) {
        PyErr_Format(PyExc_ValueError, "sbbf_op: op must be OP_ADD or OP_CONTAINS, not %d", op);
        return NULL;
    }
    HELD(held, 4);
    Py_buffer *h, *bits, *v = NULL;
    if (!(h = held_u64s(&held, hashes_obj, "hashes")) ||
        !(bits = held_acquire(&held, bits_obj, op == OP_ADD ? PyBUF_WRITABLE : PyBUF_SIMPLE)) ||
        (op == OP_CONTAINS && !(v = held_out(&held, out, h->len / 8, 1, "sbbf"))))
        return held_release(&held, NULL);
    if (bits->len < 32 || bits->len % 32 != 0 || (u64)bits->len / 32 > (1ULL << 32)) {
        PyErr_Format(PyExc_ValueError,
                     "sbbf_op: the bitset must be 1 to 2^32 blocks of 32 bytes, not %zd bytes",
                     bits->len);
        return held_release(&held, NULL);
    }
    Py_ssize_t n = h->len / 8;
    u8 *bitset = (u8 *)bits->buf;
    u64 blocks = (u64)bits->len / 32;
    u8 *flags = v ? (u8 *)v->buf : NULL;
    Py_BEGIN_ALLOW_THREADS for (Py_ssize_t i = 0; i < n; i++) {
        u64 x = u64_at(h, i);
        u8 *block = bitset + 32 * (((x >> 32) * blocks) >> 32);
        u32 key = (u32)x;
        int hit = 1;
        for (int j = 0; j < 8; j++) {
            u32 mask = 1U << ((key * SBBF_SALT[j]) >> 27);
            u32 word;
            memcpy(&word, block + 4 * j, 4);
            if (op == OP_ADD) {
                word |= mask;
                memcpy(block + 4 * j, &word, 4);
            } else {
                hit &= (word & mask) != 0;
            }
        }
        if (flags)
            flags[i] = (u8)hit;
    }
    Py_END_ALLOW_THREADS return held_release_none(&held);
}
