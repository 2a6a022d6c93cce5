/* ClickHouse granule builders (see granules.h). */
#include "granules.h"

#include "batch.h"
#include "bits.h"
#include "tokenizer.h"

#include <pthread.h>

/* Most worker threads one builder call uses. */
#define MAX_THREADS 64

/* Open-addressing set of u64 values, reused across granules; collects the distinct values.
 * One array: 0 marks an empty slot (the value 0 is kept aside, as a flag), so a probe touches
 * one cache line, not a flag array and a value array. At least four slots per item (two past
 * SET_SPARSE_ITEMS items, for memory): a probe that lands on a used slot is a mispredicted
 * branch, and at a load of 1/2 that is most of the cost of a granule of distinct values.
 * Allocated with PyMem_Raw*: the builders fill it on worker threads, without the GIL. */
typedef struct {
    u64 *slots;
    size_t alloc; /* slots allocated */
    size_t mask;  /* slots in use - 1 (a power of two minus one) */
    int shift;    /* 64 - log2(slots in use) */
} u64set;

#define SET_SPARSE_ITEMS ((size_t)1 << 20)

/* Size the set for up to max_items values. Its slots are all 0 between granules (see
 * u64set_clear), so only newly allocated ones are cleared here. */
static int u64set_reset(u64set *s, size_t max_items) {
    const size_t per_item = max_items <= SET_SPARSE_ITEMS ? 4 : 2;
    size_t cap = 16;
    int bits = 4;
    while (cap / per_item < max_items) {
        cap <<= 1;
        bits++;
    }
    if (cap > s->alloc) {
        u64 *slots = PyMem_RawRealloc(s->slots, cap * sizeof(u64));
        if (!slots)
            return -1;
        memset(slots + s->alloc, 0, (cap - s->alloc) * sizeof(u64));
        s->slots = slots;
        s->alloc = cap;
    }
    /* Only as many slots as this granule's items need are probed. */
    s->mask = cap - 1;
    s->shift = 64 - bits;
    return 0;
}

/* How many items ahead u64set_collect prefetches the slot of. */
#define SET_PREFETCH 16

/* The values are hashes already: one multiply (Fibonacci hashing, high bits) spreads them. */
static inline size_t u64set_slot(const u64set *s, u64 x) {
    return (size_t)((x * 0x9E3779B97F4A7C15ULL) >> s->shift);
}

/* Add the n u64 values at h (maybe unaligned) to the set, appending each one not seen before
 * to `distinct` (room for n); returns how many were appended. */
static size_t u64set_collect(const u64set *s, const u8 *h, size_t n, u64 *distinct) {
    u64 *const slots = s->slots;
    const size_t mask = s->mask;
    size_t count = 0;
    int zero = 0;
    for (size_t i = 0; i < n; i++) {
        const u64 x = load64(h + 8 * i);
        if (i + SET_PREFETCH < n)
            __builtin_prefetch(&slots[u64set_slot(s, load64(h + 8 * (i + SET_PREFETCH)))], 1);
        if (x == 0) {
            if (!zero)
                distinct[count++] = 0;
            zero = 1;
            continue;
        }
        for (size_t j = u64set_slot(s, x);; j = (j + 1) & mask) {
            const u64 v = slots[j];
            if (v == x)
                break;
            if (v == 0) {
                slots[j] = x;
                distinct[count++] = x;
                break;
            }
        }
    }
    return count;
}

/* Empty the set again, given the values u64set_collect appended, in their order: a granule of
 * few distinct values clears only their slots, found by a probe from each one's home slot,
 * instead of all of them. The probe looks on past empty slots, so it finds its value in any
 * order; in reverse order it meets none (the values a value probed past when it was added
 * were added before it, so they are still there). */
static void u64set_clear(const u64set *s, const u64 *distinct, size_t count) {
    u64 *const slots = s->slots;
    const size_t mask = s->mask;
    if (count > (mask + 1) / 32) {
        memset(slots, 0, (mask + 1) * sizeof(u64));
        return;
    }
    for (size_t i = count; i-- > 0;) {
        const u64 x = distinct[i];
        if (x == 0)
            continue; /* kept aside, in no slot */
        size_t j = u64set_slot(s, x);
        while (slots[j] != x)
            j = (j + 1) & mask;
        slots[j] = 0;
    }
}

static void u64set_free(u64set *s) { PyMem_RawFree(s->slots); }

/* Set the k bloom_filter positions of each of the n value hashes in a filter of fm->d bits
 * (MergeTreeIndexGranuleBloomFilter: Hash128to64(value hash, seed j) mod bits). `kind` is
 * fm->kind, a constant where this is inlined, so each kind of remainder gets a loop of its
 * own; seed-major, so that each seed stays in a register over a run of values. */
__attribute__((always_inline)) static inline void bf_set_bits(u8 *filter, const u64 *values,
                                                              size_t n, long k,
                                                              const fastmod_t *fm, int kind) {
    const fastmod_t f = *fm;
    for (long j = 0; j < k; j++) {
        const u64 seed = BF_HASH_SEED[j];
        for (size_t d = 0; d < n; d++) {
            u64 x = hash128_to_64(values[d], seed), p;
            if (kind == 0)
                p = x & (f.d - 1);
            else if (kind == 1) {
                u64 t = (u64)(((u128)f.magic * x) >> 64);
                p = x - ((t + ((x - t) >> 1)) >> f.shift) * f.d;
            } else
                p = x % f.d;
            bit_set(filter, p);
        }
    }
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define BF_AVX512 1

/* bf_set_bits with the hashes of eight values at a time in AVX-512 lanes (vpmullq: three
 * 64-bit multiplies per position are most of the scalar loop's instructions); the remainders
 * and the bit setting stay scalar (lanes may hit the same byte). Called only where the CPU
 * has AVX-512F and DQ (bf_simd). */
__attribute__((target("avx512f,avx512dq"))) static void
bf_fill_avx512(u8 *filter, const u64 *values, size_t n, long k, const fastmod_t *fm) {
    const fastmod_t f = *fm;
    const __m512i mul = _mm512_set1_epi64((long long)CH_KMUL);
    const __m512i low_bits = _mm512_set1_epi64((long long)(f.d - 1));
    u64 lane[8];
    for (long j = 0; j < k; j++) {
        const u64 seed = BF_HASH_SEED[j];
        const __m512i high = _mm512_set1_epi64((long long)seed);
        size_t d = 0;
        for (; d + 8 <= n; d += 8) {
            /* hash128_to_64(values[d..d+8], seed), lane by lane. */
            __m512i x = _mm512_loadu_si512((const void *)(values + d));
            __m512i a = _mm512_mullo_epi64(_mm512_xor_si512(x, high), mul);
            a = _mm512_xor_si512(a, _mm512_srli_epi64(a, 47));
            __m512i b = _mm512_mullo_epi64(_mm512_xor_si512(high, a), mul);
            b = _mm512_xor_si512(b, _mm512_srli_epi64(b, 47));
            b = _mm512_mullo_epi64(b, mul);
            if (f.kind == 0) {
                _mm512_storeu_si512((void *)lane, _mm512_and_si512(b, low_bits));
                for (int l = 0; l < 8; l++)
                    bit_set(filter, lane[l]);
            } else {
                _mm512_storeu_si512((void *)lane, b);
                for (int l = 0; l < 8; l++)
                    bit_set(filter, fastmod(&f, lane[l]));
            }
        }
        for (; d < n; d++)
            bit_set(filter, fastmod(&f, hash128_to_64(values[d], seed)));
    }
}
#endif

/* Whether bf_fill may use AVX-512: the CPU has it, and BLOOMSKIP_NO_SIMD is not set (which
 * lets the tests run the portable loops on such a CPU too). Read with the GIL held, once per
 * builder call; the workers get the answer. */
static int bf_simd(void) {
#ifdef BF_AVX512
    const char *off = getenv("BLOOMSKIP_NO_SIMD");
    if (off && *off)
        return 0;
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq");
#else
    return 0;
#endif
}

static void bf_fill(u8 *filter, const u64 *values, size_t n, long k, const fastmod_t *fm,
                    int simd) {
#ifdef BF_AVX512
    if (simd && fm->kind != 2) {
        bf_fill_avx512(filter, values, n, k, fm);
        return;
    }
#endif
    switch (fm->kind) {
    case 0:
        bf_set_bits(filter, values, n, k, fm, 0);
        break;
    case 1:
        bf_set_bits(filter, values, n, k, fm, 1);
        break;
    default:
        bf_set_bits(filter, values, n, k, fm, 2);
    }
}

/* Split granules [0, granules) into `parts` contiguous ranges with about the same number of
 * items each (bounds: the first column's granule bounds, private and checked). */
static void split_granules(const u64 *bounds, Py_ssize_t granules, int parts, Py_ssize_t *first) {
    u64 total = granules ? bounds[granules] - bounds[0] : 0;
    first[0] = 0;
    Py_ssize_t g = 0;
    for (int t = 1; t < parts; t++) {
        u64 target = bounds[0] + (u64)((u128)total * (u64)t / (u64)parts);
        while (g < granules && bounds[g] < target)
            g++;
        /* At least one granule per range while granules remain, so that no range is empty
         * unless there are fewer granules than ranges. */
        if (g <= first[t - 1] && first[t - 1] < granules)
            g = first[t - 1] + 1;
        first[t] = g;
    }
    first[parts] = granules;
}

/* Run work(jobs + t) for t in 0..parts-1: parts-1 on new threads, the last on this one. A thread
 * that cannot be started runs its part here. Called without the GIL. */
static void run_parts(void *(*work)(void *), void *jobs, size_t job_size, int parts) {
    pthread_t threads[MAX_THREADS];
    int started[MAX_THREADS] = {0};
    for (int t = 0; t < parts - 1; t++)
        started[t] = pthread_create(&threads[t], NULL, work, (u8 *)jobs + t * job_size) == 0;
    work((u8 *)jobs + (parts - 1) * job_size);
    for (int t = 0; t < parts - 1; t++) {
        if (started[t])
            pthread_join(threads[t], NULL);
        else
            work((u8 *)jobs + t * job_size);
    }
}

/* A private copy of checked granule bounds: the kernels run without the GIL, and the caller's
 * array could change under them. NULL (MemoryError set) when out of memory. */
static u64 *copy_bounds(const Py_buffer *view, Py_ssize_t granules) {
    u64 *copy = PyMem_RawMalloc((size_t)(granules + 1) * sizeof(u64));
    if (!copy) {
        PyErr_NoMemory();
        return NULL;
    }
    memcpy(copy, view->buf, (size_t)(granules + 1) * sizeof(u64));
    return copy;
}

static int check_threads(int threads) {
    if (threads < 1 || threads > MAX_THREADS) {
        PyErr_Format(PyExc_ValueError, "threads must be in 1..%d", MAX_THREADS);
        return -1;
    }
    return 0;
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

/* One worker of bloom_filter_granules: granules [g_lo, g_hi) into its own byte buffer. */
typedef struct {
    Py_ssize_t ncols;
    const u8 *const *hashes;  /* per column: the value hashes (u64, maybe unaligned) */
    const u64 *const *bounds; /* per column: private copies of the granule bounds */
    u64 bits_per_row;
    long k;
    u64 *offsets, *rows; /* private; offsets[g] relative to this worker's buffer */
    Py_ssize_t g_lo, g_hi;
    u8 *out;
    size_t out_len;
    int simd;   /* bf_fill may use AVX-512 (bf_simd) */
    int failed; /* out of memory */
} bf_job;

static void *bf_work(void *arg) {
    bf_job *job = arg;
    const Py_ssize_t ncols = job->ncols;
    const long k = job->k;
    u64set set = {0};
    u64 *scratch = NULL;
    size_t out_cap = 1024, out_len = 0, scratch_cap = 0;
    u8 *out = PyMem_RawMalloc(out_cap);
    if (!out)
        goto fail;
    for (Py_ssize_t g = job->g_lo; g < job->g_hi; g++) {
        size_t items = 0, max_distinct = 0, start[MAX_INDEX_COLUMNS], count[MAX_INDEX_COLUMNS];
        for (Py_ssize_t c = 0; c < ncols; c++)
            items += (size_t)(job->bounds[c][g + 1] - job->bounds[c][g]);
        if (items > scratch_cap) {
            u64 *grown = PyMem_RawRealloc(scratch, items * sizeof(u64));
            if (!grown)
                goto fail;
            scratch = grown;
            scratch_cap = items;
        }
        /* Each granule's distinct hashes per column go to `scratch`; the granule is sized by
         * the largest count and its bytes are appended to the growing output buffer. */
        size_t used = 0;
        for (Py_ssize_t c = 0; c < ncols; c++) {
            const u64 lo = job->bounds[c][g], hi = job->bounds[c][g + 1];
            if (u64set_reset(&set, (size_t)(hi - lo)) < 0)
                goto fail;
            size_t found = u64set_collect(&set, job->hashes[c] + 8 * lo, (size_t)(hi - lo),
                                          scratch + used);
            u64set_clear(&set, scratch + used, found);
            start[c] = used;
            count[c] = found;
            used += found;
            if (found > max_distinct)
                max_distinct = found;
        }
        size_t bytes = (size_t)((job->bits_per_row * max_distinct + 7) / 8);
        size_t need = out_len + varuint_size(max_distinct) + bytes * (size_t)ncols;
        if (need > out_cap) {
            while (out_cap < need)
                out_cap *= 2;
            u8 *grown = PyMem_RawRealloc(out, out_cap);
            if (!grown)
                goto fail;
            out = grown;
        }
        job->offsets[g] = out_len;
        job->rows[g] = max_distinct;
        u8 *p = varuint_write(out + out_len, max_distinct);
        memset(p, 0, bytes * (size_t)ncols);
        fastmod_t fm = fastmod_init(bytes ? bytes * 8 : 1);
        for (Py_ssize_t c = 0; c < ncols; c++, p += bytes)
            bf_fill(p, scratch + start[c], count[c], k, &fm, job->simd);
        out_len = (size_t)(p - out);
    }
    u64set_free(&set);
    PyMem_RawFree(scratch);
    job->out = out;
    job->out_len = out_len;
    return NULL;
fail:
    u64set_free(&set);
    PyMem_RawFree(scratch);
    PyMem_RawFree(out);
    job->out = NULL;
    job->failed = 1;
    return NULL;
}

/* bloom_filter_granules(columns, granules, bits_per_row, k, offsets_out, total_rows_out
 *                       [, threads]) -> bytes
 * columns: sequence of (value_hashes u64 buffer, bounds int64[G+1]). Each granule is serialized as
 * ClickHouse's MergeTreeIndexGranuleBloomFilter: VarUInt total_rows (the largest number of distinct
 * value hashes over the columns), then per column (bits_per_row*total_rows+7)/8 filter bytes.
 * threads (default 1): granules are split into that many ranges built at once, without the GIL;
 * the bytes do not depend on it. */
PyObject *py_bloom_filter_granules(PyObject *self, PyObject *args) {
    PyObject *columns, *offsets_out, *rows_out;
    Py_ssize_t granules;
    unsigned long long bits_per_row;
    long k;
    int threads = 1;
    if (!PyArg_ParseTuple(args, "OnKlOO|i", &columns, &granules, &bits_per_row, &k, &offsets_out,
                          &rows_out, &threads))
        return NULL;
    if (check_k(k, 15, "hash_functions") < 0 || check_threads(threads) < 0)
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
    HELD(held, 2 * MAX_INDEX_COLUMNS + 2);
    Py_buffer *hashes[MAX_INDEX_COLUMNS], *bounds[MAX_INDEX_COLUMNS], *offs, *rows;
    const u8 *hash_data[MAX_INDEX_COLUMNS];
    u64 *offsets = NULL, *total_rows = NULL;
    u64 *bound_copy[MAX_INDEX_COLUMNS] = {0};
    bf_job jobs[MAX_THREADS];
    int parts = 0;
    PyObject *result = NULL;
    for (Py_ssize_t c = 0; c < ncols; c++) {
        PyObject *item = PySequence_Fast_GET_ITEM(seq, c);
        PyObject *h_obj, *b_obj;
        if (!PyArg_ParseTuple(item, "OO;each column must be (hashes, bounds)", &h_obj, &b_obj) ||
            !(hashes[c] = held_u64s(&held, h_obj, "value_hashes")) ||
            !(bounds[c] = held_bounds(&held, b_obj, granules, hashes[c]->len / 8, "bounds")) ||
            !(bound_copy[c] = copy_bounds(bounds[c], granules)))
            goto done;
        hash_data[c] = (const u8 *)hashes[c]->buf;
    }
    if (!(offs = held_out(&held, offsets_out, granules + 1, 8, "offsets")) ||
        !(rows = held_out(&held, rows_out, granules, 8, "total_rows")))
        goto done;
    /* The workers fill private arrays, copied to the (maybe unaligned) outputs at the end. */
    offsets = PyMem_RawMalloc((size_t)(granules + 1) * sizeof(u64));
    total_rows = PyMem_RawMalloc((size_t)(granules ? granules : 1) * sizeof(u64));
    if (!offsets || !total_rows) {
        PyErr_NoMemory();
        goto done;
    }
    parts = threads < granules ? threads : (granules > 0 ? (int)granules : 1);
    Py_ssize_t first[MAX_THREADS + 1];
    split_granules(bound_copy[0], granules, parts, first);
    const int simd = bf_simd();
    for (int t = 0; t < parts; t++)
        jobs[t] = (bf_job){.ncols = ncols,
                           .hashes = (const u8 *const *)hash_data,
                           .bounds = (const u64 *const *)bound_copy,
                           .bits_per_row = bits_per_row,
                           .k = k,
                           .offsets = offsets,
                           .rows = total_rows,
                           .g_lo = first[t],
                           .g_hi = first[t + 1],
                           .simd = simd};
    Py_BEGIN_ALLOW_THREADS run_parts(bf_work, jobs, sizeof(bf_job), parts);
    Py_END_ALLOW_THREADS size_t total = 0;
    for (int t = 0; t < parts; t++) {
        if (jobs[t].failed) {
            PyErr_NoMemory();
            goto done;
        }
        total += jobs[t].out_len;
    }
    if (total > (size_t)PY_SSIZE_T_MAX) {
        PyErr_NoMemory();
        goto done;
    }
    result = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)total);
    if (!result)
        goto done;
    u8 *dst = (u8 *)PyBytes_AS_STRING(result);
    size_t base = 0;
    for (int t = 0; t < parts; t++) {
        if (jobs[t].out_len)
            memcpy(dst + base, jobs[t].out, jobs[t].out_len);
        for (Py_ssize_t g = jobs[t].g_lo; g < jobs[t].g_hi; g++)
            offsets[g] += base;
        base += jobs[t].out_len;
    }
    offsets[granules] = total;
    for (Py_ssize_t g = 0; g < granules; g++) {
        store_u64(offs, g, offsets[g]);
        store_u64(rows, g, total_rows[g]);
    }
    store_u64(offs, granules, total);
done:
    PyMem_RawFree(offsets);
    PyMem_RawFree(total_rows);
    for (int t = 0; t < parts; t++)
        PyMem_RawFree(jobs[t].out);
    for (Py_ssize_t c = 0; c < ncols; c++)
        PyMem_RawFree(bound_copy[c]);
    Py_DECREF(seq);
    return held_release(&held, result);
}

/* Tokens of up to 16 bytes seen in the current granule, direct-mapped: a token seen again in
 * the same granule sets the same bits, so it is not hashed again (ClickHouse hashes every
 * occurrence; the filter is the same). */
#define TOKEN_CACHE_BITS 13
#define TOKEN_CACHE_MAX 16

typedef struct {
    u64 a, b;
    u64 tag; /* granule epoch << 5 | token length; 0 = empty */
} token_slot;

/* The filter one granule's tokens go to, with what pair_add_to needs. */
typedef struct {
    u8 *filter;
    const fastmod_t *fm;
    u64 seed, seed2;
    long k;
    token_slot *cache; /* NULL: every token is hashed */
    u64 epoch;         /* (granule + 1) << 5 */
} text_filter;

static inline void text_filter_add(void *context, const u8 *token, size_t length) {
    text_filter *t = context;
    if (t->cache && length <= TOKEN_CACHE_MAX) {
        /* (a, b, length) determine the token: the loads overlap, never reach past it. */
        u64 a = 0, b = 0;
        if (length > 8) {
            a = load64(token);
            b = load64(token + length - 8);
        } else if (length >= 4) {
            a = (u64)load32(token) | ((u64)load32(token + length - 4) << 32);
        } else if (length > 0) {
            a = (u64)token[0] | ((u64)token[length >> 1] << 8) | ((u64)token[length - 1] << 16);
        }
        u64 tag = t->epoch | (u64)length;
        size_t i = (size_t)(((a * 0x9E3779B97F4A7C15ULL) ^ (b * 0xC2B2AE3D27D4EB4FULL) ^ length) >>
                            (64 - TOKEN_CACHE_BITS));
        token_slot *slot = &t->cache[i];
        if (slot->tag == tag && slot->a == a && slot->b == b)
            return;
        slot->a = a;
        slot->b = b;
        slot->tag = tag;
    }
    pair_add_to(t->filter, t->fm, token, length, t->seed, t->seed2, t->k);
}

/* Add every token of one string to a granule's filter. Flattened, so that the sink is inlined
 * into the tokenizer's loops (as fast as a loop written for this builder alone). */
__attribute__((flatten)) static void text_add_string(text_filter *t, const u8 *s, size_t len,
                                                     int tokenizer, size_t n) {
    for_each_token(s, len, tokenizer, n, text_filter_add, t);
}

/* One worker of text_granules: granules [g_lo, g_hi) into their rows of the output. */
typedef struct {
    const batch_t *chunks; /* the strings: chunk c holds items starts[c] .. starts[c+1]-1 */
    const u64 *starts;
    const u64 *bounds; /* private copy, checked */
    u8 *out;
    Py_ssize_t size_bytes;
    int tokenizer;
    size_t n;
    u64 seed;
    long k;
    const fastmod_t *fm;
    Py_ssize_t g_lo, g_hi;
    int failed; /* an item's offsets changed since they were checked */
} text_job;

static void *text_work(void *arg) {
    text_job *job = arg;
    Py_ssize_t c = 0; /* the chunk of the current item; items are visited in order */
    /* Without memory for the cache every token is hashed: the same filter, more slowly. */
    token_slot *cache = PyMem_RawCalloc((size_t)1 << TOKEN_CACHE_BITS, sizeof(token_slot));
    text_filter t = {.fm = job->fm,
                     .seed = job->seed,
                     .seed2 = SEED_GEN_A * job->seed + SEED_GEN_B,
                     .k = job->k,
                     .cache = cache};
    for (Py_ssize_t g = job->g_lo; g < job->g_hi; g++) {
        t.filter = job->out + g * job->size_bytes;
        t.epoch = ((u64)g + 1) << 5;
        memset(t.filter, 0, (size_t)job->size_bytes);
        for (u64 i = job->bounds[g]; i < job->bounds[g + 1]; i++) {
            /* bounds <= starts[nchunks] (checked), so a chunk holding item i exists. */
            while (i >= job->starts[c + 1])
                c++;
            const batch_t *b = &job->chunks[c];
            size_t len;
            const u8 *p = batch_item_at(b, (Py_ssize_t)(i - job->starts[c]), &len);
            /* Offsets were checked once; the buffers are not ours, so check again cheaply. */
            if (p < b->data || len > (size_t)(b->data + b->data_len - p)) {
                job->failed = 1;
                break;
            }
            text_add_string(&t, p, len, job->tokenizer, job->n);
        }
    }
    PyMem_RawFree(cache);
    return NULL;
}

/* The strings of text_granules: one batch view, or a list of them laid end to end (the chunks
 * of an Arrow chunked array, read in place). Their buffers are held in `held`, grown as needed;
 * starts[c] is the first item of chunk c and starts[nchunks] the total. 0, or -1 with an
 * exception set (what was acquired is in `held` either way). */
#define MAX_TEXT_CHUNKS (1 << 20)

static int held_chunks(held_t *held, PyObject *spec, batch_t **chunks, u64 **starts,
                       Py_ssize_t *nchunks) {
    int listed = PyList_Check(spec);
    Py_ssize_t n = listed ? PyList_GET_SIZE(spec) : 1;
    if (n > MAX_TEXT_CHUNKS) {
        PyErr_Format(PyExc_ValueError, "strings: at most %d chunks", MAX_TEXT_CHUNKS);
        return -1;
    }
    /* Two buffers per chunk, and room for the bounds and the output. */
    Py_buffer *views = PyMem_Calloc((size_t)(2 * n + 4), sizeof(Py_buffer));
    *chunks = PyMem_Calloc((size_t)(n ? n : 1), sizeof(batch_t));
    *starts = PyMem_Calloc((size_t)(n + 1), sizeof(u64));
    if (!views || !*chunks || !*starts) {
        PyMem_Free(views);
        PyErr_NoMemory();
        return -1;
    }
    held->view = views;
    held->capacity = (int)(2 * n + 4);
    for (Py_ssize_t c = 0; c < n; c++) {
        if (held_batch(held, listed ? PyList_GET_ITEM(spec, c) : spec, &(*chunks)[c]) < 0)
            return -1;
        (*starts)[c + 1] = (*starts)[c] + (u64)(*chunks)[c].count;
    }
    *nchunks = n;
    return 0;
}

/* text_granules(strings, bounds, granules, tokenizer, n, size_bytes, k, seed, out[, threads])
 * n: the n-gram size, or the packed sparse-gram parameters (tokenizer.h).
 * strings: a batch view, or a list of batch views (chunks laid end to end).
 * threads (default 1): granules are split into that many ranges built at once, without the GIL;
 * the filters do not depend on it. */
PyObject *py_text_granules(PyObject *self, PyObject *args) {
    PyObject *spec, *bounds_obj, *out;
    Py_ssize_t granules, size_bytes;
    int tokenizer, threads = 1;
    unsigned long long n, seed;
    long k;
    if (!PyArg_ParseTuple(args, "OOniKnlKO|i", &spec, &bounds_obj, &granules, &tokenizer, &n, &size_bytes,
                          &k, &seed, &out, &threads))
        return NULL;
    if (tokenizer != TOKENIZER_NGRAM && tokenizer != TOKENIZER_TOKEN &&
        tokenizer != TOKENIZER_SPARSE_GRAMS) {
        PyErr_SetString(PyExc_ValueError, "tokenizer must be 0 (ngram), 1 (token) or 2 (sparse grams)");
        return NULL;
    }
    if (tokenizer == TOKENIZER_SPARSE_GRAMS && !sparse_params_valid((size_t)n)) {
        PyErr_SetString(PyExc_ValueError, "n: invalid packed sparse-gram parameters");
        return NULL;
    }
    if (tokenizer == TOKENIZER_NGRAM && (n < 1 || n > 1024)) {
        PyErr_SetString(PyExc_ValueError, "n must be in 1..1024");
        return NULL;
    }
    if (check_threads(threads) < 0)
        return NULL;
    if (size_bytes < 1 || granules < 0 || check_k(k, 1 << 20, "hash_functions") < 0) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_ValueError, "size_bytes must be > 0 and granules >= 0");
        return NULL;
    }
    held_t held = {NULL, 0, 0};
    batch_t *chunks = NULL;
    u64 *starts = NULL, *bound_copy = NULL;
    Py_ssize_t nchunks = 0;
    Py_buffer *bounds, *v;
    PyObject *result = NULL;
    if (held_chunks(&held, spec, &chunks, &starts, &nchunks) < 0)
        goto done;
    if (starts[nchunks] > (u64)PY_SSIZE_T_MAX) {
        PyErr_SetString(PyExc_ValueError, "strings: too many items");
        goto done;
    }
    if (!(bounds = held_bounds(&held, bounds_obj, granules, (Py_ssize_t)starts[nchunks], "bounds")))
        goto done;
    if (granules > 0 && size_bytes > PY_SSIZE_T_MAX / granules) {
        PyErr_SetString(PyExc_ValueError, "granules * size_bytes overflows");
        goto done;
    }
    if (!(v = held_out(&held, out, granules * size_bytes, 1, "text_granules")) ||
        !(bound_copy = copy_bounds(bounds, granules)))
        goto done;
    fastmod_t fm = fastmod_init((u64)size_bytes * 8);
    int parts = threads < granules ? threads : (granules > 0 ? (int)granules : 1);
    Py_ssize_t first[MAX_THREADS + 1];
    split_granules(bound_copy, granules, parts, first);
    /* The workers run without the GIL: the CPU check (and its getenv) is made here, once. */
    size_t parameter = (size_t)n;
    if (tokenizer == TOKENIZER_SPARSE_GRAMS)
        parameter = sparse_params_for_cpu(parameter);
    text_job jobs[MAX_THREADS];
    for (int t = 0; t < parts; t++)
        jobs[t] = (text_job){.chunks = chunks,
                             .starts = starts,
                             .bounds = bound_copy,
                             .out = (u8 *)v->buf,
                             .size_bytes = size_bytes,
                             .tokenizer = tokenizer,
                             .n = parameter,
                             .seed = seed,
                             .k = k,
                             .fm = &fm,
                             .g_lo = first[t],
                             .g_hi = first[t + 1]};
    Py_BEGIN_ALLOW_THREADS run_parts(text_work, jobs, sizeof(text_job), parts);
    Py_END_ALLOW_THREADS for (int t = 0; t < parts; t++) if (jobs[t].failed) {
        PyErr_SetString(PyExc_ValueError, "text_granules: the strings changed while being read");
        goto done;
    }
    result = Py_NewRef(Py_None);
done:
    held_release(&held, NULL);
    PyMem_Free(held.view);
    PyMem_Free(chunks);
    PyMem_Free(starts);
    PyMem_RawFree(bound_copy);
    return result;
}
