/*
 * The per-granule builders of ClickHouse's skip indexes: bloom_filter granules (serialized as
 * MergeTreeIndexGranuleBloomFilter) and ngrambf_v1 / tokenbf_v1 / sparse_grams granule filters.
 */
#ifndef BLOOMSKIP_GRANULES_H
#define BLOOMSKIP_GRANULES_H

#include <Python.h>

PyObject *py_bloom_filter_granules(PyObject *self, PyObject *args);
PyObject *py_text_granules(PyObject *self, PyObject *args);

#endif
