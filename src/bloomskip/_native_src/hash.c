/* Python entry points of the hashes: one value, or every item of a batch (see hash.h). */
#include "hash.h"

#include "batch.h"

PyObject *py_murmur3_128(PyObject *self, PyObject *args) {
    Py_buffer buf;
    unsigned long long seed;
    if (!PyArg_ParseTuple(args, "y*K", &buf, &seed))
        return NULL;
    u64 h1, h2;
    Py_BEGIN_ALLOW_THREADS murmur3_128((const u8 *)buf.buf, (size_t)buf.len, seed, 0, &h1, &h2);
    Py_END_ALLOW_THREADS PyBuffer_Release(&buf);
    return Py_BuildValue("(KK)", (unsigned long long)h1, (unsigned long long)h2);
}

PyObject *py_tsfile_hash32(PyObject *self, PyObject *args) {
    Py_buffer buf;
    int seed, signed_tail;
    if (!PyArg_ParseTuple(args, "y*ip", &buf, &seed, &signed_tail))
        return NULL;
    int32_t h = tsfile_hash32((const u8 *)buf.buf, (size_t)buf.len, seed, signed_tail);
    PyBuffer_Release(&buf);
    return PyLong_FromLong(h);
}

PyObject *py_cityhash64(PyObject *self, PyObject *args) {
    Py_buffer buf;
    if (!PyArg_ParseTuple(args, "y*", &buf))
        return NULL;
    u64 h = city_hash64((const u8 *)buf.buf, (size_t)buf.len);
    PyBuffer_Release(&buf);
    return PyLong_FromUnsignedLongLong(h);
}

PyObject *py_cityhash64_with_seed(PyObject *self, PyObject *args) {
    Py_buffer buf;
    unsigned long long seed;
    if (!PyArg_ParseTuple(args, "y*K", &buf, &seed))
        return NULL;
    u64 h = city_seeded_from(city_hash64((const u8 *)buf.buf, (size_t)buf.len), seed);
    PyBuffer_Release(&buf);
    return PyLong_FromUnsignedLongLong(h);
}

PyObject *py_cityhash128(PyObject *self, PyObject *args) {
    Py_buffer buf;
    if (!PyArg_ParseTuple(args, "y*", &buf))
        return NULL;
    pair64 h = city_hash128((const u8 *)buf.buf, (size_t)buf.len);
    PyBuffer_Release(&buf);
    return Py_BuildValue("(KK)", (unsigned long long)h.first, (unsigned long long)h.second);
}

PyObject *py_hash128_to_64(PyObject *self, PyObject *args) {
    unsigned long long low, high;
    if (!PyArg_ParseTuple(args, "KK", &low, &high))
        return NULL;
    return PyLong_FromUnsignedLongLong(hash128_to_64(low, high));
}

PyObject *py_int_hash64(PyObject *self, PyObject *args) {
    unsigned long long x;
    if (!PyArg_ParseTuple(args, "K", &x))
        return NULL;
    return PyLong_FromUnsignedLongLong(fmix64(x));
}

PyObject *py_xxhash64(PyObject *self, PyObject *args) {
    Py_buffer buf;
    unsigned long long seed;
    if (!PyArg_ParseTuple(args, "y*K", &buf, &seed))
        return NULL;
    u64 h = xxh64((const u8 *)buf.buf, (size_t)buf.len, seed);
    PyBuffer_Release(&buf);
    return PyLong_FromUnsignedLongLong(h);
}

/* hash_batch(kind, batch, seed, signed_tail, out1, out2): one hash over every item of a batch.
 * out1 takes int32 for HASH_TSFILE32 and u64 otherwise; out2 (u64) the second half of the
 * 128-bit hashes, None for the others. The seed is the 64-bit pattern: zero-extended for
 * MurmurHash3 (uint32), CityHash and XXH64 (uint64), the sign-extended Java int for TsFile. */
PyObject *py_hash_batch(PyObject *self, PyObject *args) {
    int kind, signed_tail;
    PyObject *spec, *o1, *o2;
    unsigned long long seed;
    if (!PyArg_ParseTuple(args, "iOKpOO", &kind, &spec, &seed, &signed_tail, &o1, &o2))
        return NULL;
    if (kind < HASH_MURMUR3_128 || kind > HASH_XXH64) {
        PyErr_Format(PyExc_ValueError, "unknown hash kind %d", kind);
        return NULL;
    }
    int halves = kind == HASH_MURMUR3_128 || kind == HASH_CITY128;
    HELD(held, 4);
    batch_t b;
    Py_buffer *v1, *v2 = NULL;
    if (held_batch(&held, spec, &b) < 0 ||
        !(v1 = held_out(&held, o1, b.count, kind == HASH_TSFILE32 ? 4 : 8, "hash output")) ||
        (halves && !(v2 = held_out(&held, o2, b.count, 8, "second hash output"))))
        return held_release(&held, NULL);
    /* The kernels store through plain pointers, which the loops keep in registers. */
    u8 *out1 = (u8 *)v1->buf, *out2 = v2 ? (u8 *)v2->buf : NULL;
    Py_BEGIN_ALLOW_THREADS switch (kind) {
    case HASH_MURMUR3_128:
        FOR_EACH_ITEM(b, {
            u64 h1, h2;
            murmur3_128(p, len, seed, 0, &h1, &h2);
            memcpy(out1 + 8 * i, &h1, 8);
            memcpy(out2 + 8 * i, &h2, 8);
        });
        break;
    case HASH_TSFILE32:
        FOR_EACH_ITEM(b, {
            int32_t h = tsfile_hash32(p, len, (int32_t)(int64_t)seed, signed_tail);
            memcpy(out1 + 4 * i, &h, 4);
        });
        break;
    case HASH_CITY64:
        FOR_EACH_ITEM(b, {
            u64 h = city_hash64(p, len);
            memcpy(out1 + 8 * i, &h, 8);
        });
        break;
    case HASH_CITY64_SEEDED:
        FOR_EACH_ITEM(b, {
            u64 h = city_seeded_from(city_hash64(p, len), seed);
            memcpy(out1 + 8 * i, &h, 8);
        });
        break;
    case HASH_CITY128:
        FOR_EACH_ITEM(b, {
            pair64 h = city_hash128(p, len);
            memcpy(out1 + 8 * i, &h.first, 8);
            memcpy(out2 + 8 * i, &h.second, 8);
        });
        break;
    case HASH_XXH64:
        FOR_EACH_ITEM(b, {
            u64 h = xxh64(p, len, seed);
            memcpy(out1 + 8 * i, &h, 8);
        });
        break;
    }
    Py_END_ALLOW_THREADS return held_release_none(&held);
}

/* out[i] = Hash128to64(low[i], high[i]); out may alias an input. */
PyObject *py_hash128_to_64_array(PyObject *self, PyObject *args) {
    PyObject *lo_obj, *hi_obj, *out;
    if (!PyArg_ParseTuple(args, "OOO", &lo_obj, &hi_obj, &out))
        return NULL;
    HELD(held, 4);
    Py_buffer *lo, *hi, *v;
    if (!(lo = held_u64s(&held, lo_obj, "low")) || !(hi = held_u64s(&held, hi_obj, "high")))
        return held_release(&held, NULL);
    Py_ssize_t n = lo->len / 8;
    if (hi->len / 8 != n) {
        PyErr_SetString(PyExc_ValueError, "low and high must have the same length");
        return held_release(&held, NULL);
    }
    if (!(v = held_out(&held, out, n, 8, "hash128_to_64")))
        return held_release(&held, NULL);
    Py_BEGIN_ALLOW_THREADS for (Py_ssize_t i = 0; i < n; i++)
        store_u64(v, i, hash128_to_64(u64_at(lo, i), u64_at(hi, i)));
    Py_END_ALLOW_THREADS return held_release_none(&held);
}

/* out[i] = intHash64(x[i]); out may alias x. */
PyObject *py_int_hash64_array(PyObject *self, PyObject *args) {
    PyObject *x_obj, *out;
    if (!PyArg_ParseTuple(args, "OO", &x_obj, &out))
        return NULL;
    HELD(held, 4);
    Py_buffer *x, *v;
    if (!(x = held_u64s(&held, x_obj, "x")) || !(v = held_out(&held, out, x->len / 8, 8, "int_hash64")))
        return held_release(&held, NULL);
    Py_ssize_t n = x->len / 8;
    Py_BEGIN_ALLOW_THREADS for (Py_ssize_t i = 0; i < n; i++) store_u64(v, i, fmix64(u64_at(x, i)));
    Py_END_ALLOW_THREADS return held_release_none(&held);
}
