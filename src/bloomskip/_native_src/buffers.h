/*
 * Argument buffers of the entry points. An entry point declares its buffers with HELD, acquires
 * each one through it (the acquire functions check lengths as they go and raise on a bad one),
 * and ends every path with `return held_release(&held, result)`, which releases whatever was
 * acquired. Buffers that PyArg_ParseTuple fills ("y*") go into held.view[0..] directly, followed
 * by setting held.count.
 */
#ifndef BLOOMSKIP_BUFFERS_H
#define BLOOMSKIP_BUFFERS_H

#include "core.h"

typedef struct {
    Py_buffer *view;
    int count, capacity;
} held_t;

/* Declare `name`, a held_t with room for `capacity` buffers on the stack. */
#define HELD(name, capacity)                                                                       \
    Py_buffer name##_views_[capacity];                                                             \
    held_t name = {name##_views_, 0, capacity}

/* A buffer of obj (PyBUF_SIMPLE or PyBUF_WRITABLE); NULL with an exception set on failure. */
Py_buffer *held_acquire(held_t *held, PyObject *obj, int flags);

/* A read-only buffer of u64 values (its length a multiple of 8). */
Py_buffer *held_u64s(held_t *held, PyObject *obj, const char *name);

/* A writable output buffer holding at least `count` items of `itemsize` bytes. */
Py_buffer *held_out(held_t *held, PyObject *obj, Py_ssize_t count, Py_ssize_t itemsize,
                    const char *name);

/* Granule bounds: int64[granules + 1], non-decreasing, within 0..items. */
Py_buffer *held_bounds(held_t *held, PyObject *obj, Py_ssize_t granules, Py_ssize_t items,
                       const char *name);

/* Release every buffer acquired through held and return result (NULL passes through). */
PyObject *held_release(held_t *held, PyObject *result);

/* held_release with None as the result. */
PyObject *held_release_none(held_t *held);

int check_k(long k, long max_k, const char *name);
int check_bit_count(unsigned long long bit_count);

static inline u64 u64_at(const Py_buffer *v, Py_ssize_t i) {
    u64 x;
    memcpy(&x, (const u8 *)v->buf + 8 * i, 8);
    return x;
}

static inline void store_u64(Py_buffer *v, Py_ssize_t i, u64 x) {
    memcpy((u8 *)v->buf + 8 * i, &x, 8);
}

#endif
