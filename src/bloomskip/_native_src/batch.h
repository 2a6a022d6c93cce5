/*
 * Batch views: the (data, offsets | None, first, count, width) tuples that bloomskip._batch
 * builds, holding either variable-length items (offsets of 4 or 8 bytes each, as in an Arrow
 * string/binary array) or fixed-width items laid end to end.
 */
#ifndef BLOOMSKIP_BATCH_H
#define BLOOMSKIP_BATCH_H

#include "buffers.h"

typedef struct {
    const u8 *data;
    Py_ssize_t data_len;
    const u8 *offsets; /* NULL for fixed-width items */
    Py_ssize_t first;  /* index of the first item in offsets (Arrow's array offset) */
    Py_ssize_t count;
    Py_ssize_t width; /* fixed item width, when there are no offsets */
    int offset_size;  /* 4 or 8; 0 for fixed-width items */
} batch_t;

/* Parse a batch view, holding its buffers in `held`, and check every offset once, up front, so
 * the kernels may index items without further checks. 0, or -1 with an exception set. */
int held_batch(held_t *held, PyObject *spec, batch_t *b);

static inline int64_t batch_offset(const batch_t *b, Py_ssize_t i) {
    return b->offset_size == 4 ? load_i32(b->offsets + 4 * i) : load_i64(b->offsets + 8 * i);
}

/* Item i of a batch, for random access (granule ranges). */
static inline const u8 *batch_item_at(const batch_t *b, Py_ssize_t i, size_t *len) {
    if (b->offset_size == 0) {
        *len = (size_t)b->width;
        return b->data + (b->first + i) * b->width;
    }
    int64_t start = batch_offset(b, b->first + i);
    *len = (size_t)(batch_offset(b, b->first + i + 1) - start);
    return b->data + start;
}

/* Run the body for every item `i` of batch B with `const u8 *p` and `size_t len` bound to it. The
 * layout (4- or 8-byte offsets, or fixed width) is resolved once, outside the loop, which keeps
 * the per-item cost to the hash itself. */
#define FOR_EACH_ITEM(B, ...)                                                                      \
    do {                                                                                           \
        const u8 *base_ = (B).data;                                                                \
        const u8 *offs_ = (B).offsets;                                                             \
        const Py_ssize_t count_ = (B).count;                                                       \
        if ((B).offset_size == 4) {                                                                \
            offs_ += 4 * (B).first;                                                                \
            int64_t next_ = load_i32(offs_);                                                       \
            for (Py_ssize_t i = 0; i < count_; i++) {                                              \
                int64_t start_ = next_;                                                            \
                next_ = load_i32(offs_ + 4 * (i + 1));                                             \
                const u8 *p = base_ + start_;                                                      \
                size_t len = (size_t)(next_ - start_);                                             \
                __VA_ARGS__                                                                        \
            }                                                                                      \
        } else if ((B).offset_size == 8) {                                                         \
            offs_ += 8 * (B).first;                                                                \
            int64_t next_ = load_i64(offs_);                                                       \
            for (Py_ssize_t i = 0; i < count_; i++) {                                              \
                int64_t start_ = next_;                                                            \
                next_ = load_i64(offs_ + 8 * (i + 1));                                             \
                const u8 *p = base_ + start_;                                                      \
                size_t len = (size_t)(next_ - start_);                                             \
                __VA_ARGS__                                                                        \
            }                                                                                      \
        } else {                                                                                   \
            const size_t w_ = (size_t)(B).width;                                                   \
            for (Py_ssize_t i = 0; i < count_; i++) {                                              \
                const u8 *p = base_ + ((size_t)(B).first + (size_t)i) * w_;                        \
                size_t len = w_;                                                                   \
                __VA_ARGS__                                                                        \
            }                                                                                      \
        }                                                                                          \
    } while (0)

#endif
