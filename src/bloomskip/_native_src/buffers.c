/* Argument buffers of the entry points (see buffers.h). */
#include "buffers.h"

Py_buffer *held_acquire(held_t *held, PyObject *obj, int flags) {
    if (held->count == held->capacity) {
        PyErr_SetString(PyExc_SystemError, "bloomskip._native: too many buffers held");
        return NULL;
    }
    Py_buffer *view = &held->view[held->count];
    if (PyObject_GetBuffer(obj, view, flags) < 0)
        return NULL;
    held->count++;
    return view;
}

Py_buffer *held_u64s(held_t *held, PyObject *obj, const char *name) {
    Py_buffer *view = held_acquire(held, obj, PyBUF_SIMPLE);
    if (view && view->len % 8 != 0) {
        PyErr_Format(PyExc_ValueError, "%s: buffer length %zd is not a multiple of 8", name,
                     view->len);
        return NULL;
    }
    return view;
}

Py_buffer *held_out(held_t *held, PyObject *obj, Py_ssize_t count, Py_ssize_t itemsize,
                    const char *name) {
    Py_buffer *view = held_acquire(held, obj, PyBUF_WRITABLE);
    if (view && count > 0 && view->len / itemsize < count) {
        PyErr_Format(PyExc_ValueError, "%s: output buffer holds %zd bytes, %zd needed", name,
                     view->len, count * itemsize);
        return NULL;
    }
    return view;
}

Py_buffer *held_bounds(held_t *held, PyObject *obj, Py_ssize_t granules, Py_ssize_t items,
                       const char *name) {
    Py_buffer *view = held_u64s(held, obj, name);
    if (!view)
        return NULL;
    if (view->len / 8 != granules + 1) {
        PyErr_Format(PyExc_ValueError, "%s: %zd bounds for %zd granules (want %zd)", name,
                     view->len / 8, granules, granules + 1);
        return NULL;
    }
    int64_t prev = (int64_t)u64_at(view, 0);
    if (prev < 0 || prev > items) {
        PyErr_Format(PyExc_ValueError, "%s: bound 0 (%lld) outside 0..%zd", name,
                     (long long)prev, items);
        return NULL;
    }
    for (Py_ssize_t g = 1; g <= granules; g++) {
        int64_t cur = (int64_t)u64_at(view, g);
        if (cur < prev || cur > items) {
            PyErr_Format(PyExc_ValueError, "%s: bound %zd (%lld) decreasing or past %zd items",
                         name, g, (long long)cur, items);
            return NULL;
        }
        prev = cur;
    }
    return view;
}

PyObject *held_release(held_t *held, PyObject *result) {
    for (int i = 0; i < held->count; i++)
        PyBuffer_Release(&held->view[i]);
    held->count = 0;
    return result;
}

PyObject *held_release_none(held_t *held) { return held_release(held, Py_NewRef(Py_None)); }

int check_k(long k, long max_k, const char *name) {
    if (k < 1 || k > max_k) {
        PyErr_Format(PyExc_ValueError, "%s must be in 1..%ld, got %ld", name, max_k, k);
        return -1;
    }
    return 0;
}

int check_bit_count(unsigned long long bit_count) {
    if (bit_count == 0) {
        PyErr_SetString(PyExc_ValueError, "bit_count must be > 0");
        return -1;
    }
    return 0;
}
