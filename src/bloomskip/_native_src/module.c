/*
 * bloomskip._native: the hot kernels of bloomskip.
 *
 * Units: hash (MurmurHash3 x64-128 and TsFile's Murmur128Hash variants, CityHash v1.0.2,
 * ClickHouse's intHash64, XXH64), batch (batch views), buffers (argument buffers), bits (bitsets and the
 * bit-position schemes of TsFile and ClickHouse, and Parquet's split-block filter), tokenizer and granules (ClickHouse's
 * bloom_filter and ngrambf_v1/tokenbf_v1 granule builders), tsfile_scan (the TsFile metadata
 * scanner). This file holds the method table, the exported constants and the module's init.
 *
 * The module speaks only the buffer protocol: Python allocates every output (numpy arrays) and
 * passes it in, so nothing here depends on the numpy C API. Every length, offset and index is
 * checked before it is used; a bad argument raises ValueError or TypeError, never reads out of
 * bounds.
 */
#include "bits.h"
#include "granules.h"
#include "hash.h"
#include "tokenizer.h"
#include "tsfile_scan.h"

static PyMethodDef methods[] = {
    {"murmur3_128", py_murmur3_128, METH_VARARGS, "murmur3_128(data, seed) -> (h1, h2)"},
    {"tsfile_hash32", py_tsfile_hash32, METH_VARARGS, "tsfile_hash32(data, seed, signed_tail) -> int"},
    {"cityhash64", py_cityhash64, METH_VARARGS, "cityhash64(data) -> int"},
    {"cityhash64_with_seed", py_cityhash64_with_seed, METH_VARARGS, "cityhash64_with_seed(data, seed)"},
    {"cityhash128", py_cityhash128, METH_VARARGS, "cityhash128(data) -> (low64, high64)"},
    {"hash128_to_64", py_hash128_to_64, METH_VARARGS, "hash128_to_64(low, high) -> int"},
    {"int_hash64", py_int_hash64, METH_VARARGS, "int_hash64(x) -> int"},
    {"xxhash64", py_xxhash64, METH_VARARGS, "xxhash64(data, seed) -> int"},
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
    {"tokenize", py_tokenize, METH_VARARGS, "tokenize(data, tokenizer, n) -> [(start, end)]"},
    {"fastmod", py_fastmod, METH_VARARGS, NULL},
    {"sbbf_op", py_sbbf_op, METH_VARARGS, NULL},
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

/* The integer arguments that select a variant of an entry point, by name. */
static const struct {
    const char *name;
    int value;
} constants[] = {
    {"HASH_MURMUR3_128", HASH_MURMUR3_128},
    {"HASH_TSFILE32", HASH_TSFILE32},
    {"HASH_CITY64", HASH_CITY64},
    {"HASH_CITY64_SEEDED", HASH_CITY64_SEEDED},
    {"HASH_CITY128", HASH_CITY128},
    {"HASH_XXH64", HASH_XXH64},
    {"OP_POSITIONS", OP_POSITIONS},
    {"OP_ADD", OP_ADD},
    {"OP_CONTAINS", OP_CONTAINS},
    {"TOKENIZER_NGRAM", TOKENIZER_NGRAM},
    {"TOKENIZER_TOKEN", TOKENIZER_TOKEN},
    {"TOKENIZER_SPARSE_GRAMS", TOKENIZER_SPARSE_GRAMS},
    {"TSFILE_KEY_MEASUREMENT", TSFILE_KEY_MEASUREMENT},
    {"TSFILE_KEY_DEVICE_V3", TSFILE_KEY_DEVICE_V3},
    {"TSFILE_KEY_DEVICE_V4", TSFILE_KEY_DEVICE_V4},
};

PyMODINIT_FUNC PyInit__native(void) {
    const u32 probe = 1;
    if (*(const u8 *)&probe != 1) {
        PyErr_SetString(PyExc_ImportError, "bloomskip's kernels need a little-endian host");
        return NULL;
    }
    PyObject *m = PyModule_Create(&module);
    if (!m)
        return NULL;
    for (size_t i = 0; i < sizeof(constants) / sizeof(constants[0]); i++) {
        if (PyModule_AddIntConstant(m, constants[i].name, constants[i].value) < 0) {
            Py_DECREF(m);
            return NULL;
        }
    }
    if (tsfile_scan_add_types(m) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
