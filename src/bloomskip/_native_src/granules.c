/* ClickHouse granule builders (see granules.h). */
#include "granules.h"

#include "batch.h"
#include "bits.h"
#include "tokenizer.h"

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
PyObject *py_bloom_filter_granules(PyObject *self, PyObject *args) {
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
    HELD(held, 2 * MAX_INDEX_COLUMNS + 2);
    Py_buffer *hashes[MAX_INDEX_COLUMNS], *bounds[MAX_INDEX_COLUMNS], *offs, *rows;
    PyObject *result = NULL;
    u64set set = {0};
    u64 *scratch = NULL;
    u8 *out = NULL;
    for (Py_ssize_t c = 0; c < ncols; c++) {
        PyObject *item = PySequence_Fast_GET_ITEM(seq, c);
        PyObject *h_obj, *b_obj;
        if (!PyArg_ParseTuple(item, "OO;each column must be (hashes, bounds)", &h_obj, &b_obj) ||
            !(hashes[c] = held_u64s(&held, h_obj, "value_hashes")) ||
            !(bounds[c] = held_bounds(&held, b_obj, granules, hashes[c]->len / 8, "bounds")))
            goto done;
    }
    if (!(offs = held_out(&held, offsets_out, granules + 1, 8, "offsets")) ||
        !(rows = held_out(&held, rows_out, granules, 8, "total_rows")))
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
            items += (size_t)(u64_at(bounds[c], g + 1) - u64_at(bounds[c], g));
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
            Py_ssize_t lo = (Py_ssize_t)u64_at(bounds[c], g), hi = (Py_ssize_t)u64_at(bounds[c], g + 1);
            if (u64set_reset(&set, (size_t)(hi - lo)) < 0) {
                PyErr_NoMemory();
                goto done;
            }
            for (Py_ssize_t i = lo; i < hi; i++)
                u64set_add(&set, u64_at(hashes[c], i));
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
        store_u64(offs, g, out_len);
        store_u64(rows, g, max_distinct);
        u8 *p = varuint_write(out + out_len, max_distinct);
        memset(p, 0, bytes * (size_t)ncols);
        fastmod_t fm = fastmod_init(bytes ? bytes * 8 : 1);
        for (Py_ssize_t c = 0; c < ncols; c++, p += bytes)
            for (size_t d = start[c]; d < start[c] + count[c]; d++)
                for (long j = 0; j < k; j++)
                    bit_set(p, fastmod(&fm, hash128_to_64(scratch[d], BF_HASH_SEED[j])));
        out_len = (size_t)(p - out);
    }
    store_u64(offs, granules, out_len);
    result = PyBytes_FromStringAndSize((const char *)out, (Py_ssize_t)out_len);
done:
    u64set_free(&set);
    PyMem_Free(scratch);
    PyMem_Free(out);
    Py_DECREF(seq);
    return held_release(&held, result);
}

/* The filter one granule's tokens go to, with what pair_add_to needs. */
typedef struct {
    u8 *filter;
    const fastmod_t *fm;
    u64 seed, seed2;
    long k;
} text_filter;

static void text_filter_add(void *context, const u8 *token, size_t length) {
    const text_filter *t = context;
    pair_add_to(t->filter, t->fm, token, length, t->seed, t->seed2, t->k);
}

/* Add every token of one string to a granule's filter. Flattened, so that the sink is inlined
 * into the tokenizer's loops (as fast as a loop written for this builder alone). */
__attribute__((flatten)) static void text_add_string(text_filter *t, const u8 *s, size_t len,
                                                     int tokenizer, size_t n) {
    for_each_token(s, len, tokenizer, n, text_filter_add, t);
}

/* text_granules(batch, bounds, granules, tokenizer, n, size_bytes, k, seed, out) */
PyObject *py_text_granules(PyObject *self, PyObject *args) {
    PyObject *spec, *bounds_obj, *out;
    Py_ssize_t granules, size_bytes;
    int tokenizer;
    unsigned long long n, seed;
    long k;
    if (!PyArg_ParseTuple(args, "OOniKnlKO", &spec, &bounds_obj, &granules, &tokenizer, &n, &size_bytes, &k,
                          &seed, &out))
        return NULL;
    if (tokenizer != TOKENIZER_NGRAM && tokenizer != TOKENIZER_TOKEN) {
        PyErr_SetString(PyExc_ValueError, "tokenizer must be 0 (ngram) or 1 (token)");
        return NULL;
    }
    if (tokenizer == TOKENIZER_NGRAM && (n < 1 || n > 1024)) {
        PyErr_SetString(PyExc_ValueError, "n must be in 1..1024");
        return NULL;
    }
    if (size_bytes < 1 || granules < 0 || check_k(k, 1 << 20, "hash_functions") < 0) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_ValueError, "size_bytes must be > 0 and granules >= 0");
        return NULL;
    }
    HELD(held, 4);
    batch_t b;
    Py_buffer *bounds, *v;
    if (held_batch(&held, spec, &b) < 0 ||
        !(bounds = held_bounds(&held, bounds_obj, granules, b.count, "bounds")))
        return held_release(&held, NULL);
    if (granules > 0 && size_bytes > PY_SSIZE_T_MAX / granules) {
        PyErr_SetString(PyExc_ValueError, "granules * size_bytes overflows");
        return held_release(&held, NULL);
    }
    if (!(v = held_out(&held, out, granules * size_bytes, 1, "text_granules")))
        return held_release(&held, NULL);
    memset(v->buf, 0, (size_t)(granules * size_bytes));
    fastmod_t fm = fastmod_init((u64)size_bytes * 8);
    text_filter t = {.fm = &fm, .seed = seed, .seed2 = SEED_GEN_A * seed + SEED_GEN_B, .k = k};
    Py_BEGIN_ALLOW_THREADS for (Py_ssize_t g = 0; g < granules; g++) {
        t.filter = (u8 *)v->buf + g * size_bytes;
        Py_ssize_t lo = (Py_ssize_t)u64_at(bounds, g), hi = (Py_ssize_t)u64_at(bounds, g + 1);
        for (Py_ssize_t i = lo; i < hi; i++) {
            size_t len;
            const u8 *p = batch_item_at(&b, i, &len);
            text_add_string(&t, p, len, tokenizer, (size_t)n);
        }
    }
    Py_END_ALLOW_THREADS return held_release_none(&held);
}
