/* Batch views (see batch.h). */
#include "batch.h"

int held_batch(held_t *held, PyObject *spec, batch_t *b) {
    memset(b, 0, sizeof(*b));
    if (!PyTuple_Check(spec) || PyTuple_GET_SIZE(spec) != 5) {
        PyErr_SetString(PyExc_TypeError, "batch must be a (data, offsets, first, count, width) tuple");
        return -1;
    }
    PyObject *data_obj = PyTuple_GET_ITEM(spec, 0), *offsets_obj = PyTuple_GET_ITEM(spec, 1);
    b->first = PyLong_AsSsize_t(PyTuple_GET_ITEM(spec, 2));
    b->count = PyLong_AsSsize_t(PyTuple_GET_ITEM(spec, 3));
    b->width = PyLong_AsSsize_t(PyTuple_GET_ITEM(spec, 4));
    if (PyErr_Occurred())
        return -1;
    if (b->first < 0 || b->count < 0 || b->width < 0) {
        PyErr_SetString(PyExc_ValueError, "batch: first, count and width must be >= 0");
        return -1;
    }
    Py_buffer *data = held_acquire(held, data_obj, PyBUF_SIMPLE);
    if (!data)
        return -1;
    b->data = (const u8 *)data->buf;
    b->data_len = data->len;
    if (offsets_obj == Py_None) {
        if (b->width == 0 && b->count > 0) {
            PyErr_SetString(PyExc_ValueError, "batch: fixed-width items need width >= 1");
            return -1;
        }
        if (b->width > 0 && b->count > (PY_SSIZE_T_MAX / b->width) - b->first) {
            PyErr_SetString(PyExc_ValueError, "batch: item count overflows");
            return -1;
        }
        if ((b->first + b->count) * b->width > b->data_len) {
            PyErr_Format(PyExc_ValueError,
                         "batch: %zd items of %zd bytes from item %zd exceed the %zd-byte data buffer",
                         b->count, b->width, b->first, b->data_len);
            return -1;
        }
        return 0;
    }
    Py_buffer *offsets = held_acquire(held, offsets_obj, PyBUF_SIMPLE);
    if (!offsets)
        return -1;
    if (b->width != 4 && b->width != 8) {
        PyErr_SetString(PyExc_ValueError, "batch: offsets must be 4 or 8 bytes wide");
        return -1;
    }
    b->offsets = (const u8 *)offsets->buf;
    b->offset_size = (int)b->width;
    b->width = 0;
    if (b->first > PY_SSIZE_T_MAX / 16 || b->count > PY_SSIZE_T_MAX / 16 ||
        (b->first + b->count + 1) * b->offset_size > offsets->len) {
        PyErr_Format(PyExc_ValueError, "batch: offsets buffer of %zd bytes is too short for %zd items",
                     offsets->len, b->count);
        return -1;
    }
    int64_t prev = batch_offset(b, b->first);
    if (prev < 0 || prev > b->data_len) {
        PyErr_Format(PyExc_ValueError, "batch: offset %lld of item %zd is outside the data buffer",
                     (long long)prev, b->first);
        return -1;
    }
    for (Py_ssize_t i = 1; i <= b->count; i++) {
        int64_t cur = batch_offset(b, b->first + i);
        if (cur < prev || cur > b->data_len) {
            PyErr_Format(PyExc_ValueError,
                         "batch: offset %lld of item %zd is decreasing or outside the data buffer",
                         (long long)cur, b->first + i);
            return -1;
        }
        prev = cur;
    }
    return 0;
}
