/*
 * The TsFile metadata scanner: TsFileMetadata layout, MetadataIndexNode parsing and the
 * Bloom-filter verdict from a file's tail (see tsfile_scan.c).
 */
#ifndef BLOOMSKIP_TSFILE_SCAN_H
#define BLOOMSKIP_TSFILE_SCAN_H

#include <Python.h>

/* Key kinds of tsfile_index_node, exported to Python as TSFILE_KEY_* constants: measurement
 * level (keys are names), v3 device level (1-tuples), v4 device level (tuples of segments). */
enum { TSFILE_KEY_MEASUREMENT, TSFILE_KEY_DEVICE_V3, TSFILE_KEY_DEVICE_V4 };

PyObject *py_tsfile_scan_metadata(PyObject *self, PyObject *args);
PyObject *py_tsfile_index_node(PyObject *self, PyObject *args);
PyObject *py_tsfile_tail_verdict(PyObject *self, PyObject *args);

/* Add TsFileScanError (the error of the two parsers above) to the module; -1 on failure. */
int tsfile_scan_add_types(PyObject *module);

#endif
