/*
 * TsFile metadata scanning.
 *
 * tsfile_scan_metadata walks one serialized TsFileMetadata (format v3 or v4) and says where
 * its parts sit, so that testing the Bloom filter of thousands of files builds no Python
 * object per table root, schema or column; tsfile_index_node parses one MetadataIndexNode.
 * Every length is checked against the bytes that remain before anything is read, and nothing
 * is allocated from a length the input claims beyond what the bytes can hold. This is the only
 * parser of TsFileMetadata and of index nodes: on bad input it raises TsFileScanError (a
 * ValueError) carrying the message, the field, the file offset and whether the bytes ended
 * inside a field, which bloomskip.tsfile turns into its FormatError (or TruncatedError).
 * tests/tsfile/tsfile_oracle.py is an independent Python parser of the same rules, in the same
 * order, that the tests compare this one with.
 */
#include "tsfile_scan.h"

#include <stdarg.h>

#include "buffers.h"
#include "hash.h"

#define TS_HEAD_SIZE 7 /* "TsFile" + version byte */
#define TS_INT32_MAX 2147483647LL
#define TS_MAX_HASH_FUNCTIONS 8

static PyObject *ts_error_type; /* bloomskip._native.TsFileScanError */

typedef struct {
    const u8 *data;
    Py_ssize_t pos, end; /* the metadata is data[pos:end] */
    long long base;      /* file offset of data[0] */
    const char *field;   /* set by ts_fail */
    Py_ssize_t error_pos;
    int truncated; /* the bytes ended inside the field (a prefix read may be widened) */
    char message[200];
} ts_cursor;

static void ts_record(ts_cursor *c, const char *field, Py_ssize_t pos, int truncated,
                      const char *format, ...) {
    va_list args;
    va_start(args, format);
    PyOS_vsnprintf(c->message, sizeof c->message, format, args);
    va_end(args);
    c->field = field;
    c->error_pos = pos;
    c->truncated = truncated;
}

/* Record a format error in the cursor and evaluate to -1 (visibly, for the compiler's flow
 * analysis): ts_fail(cursor, field, position, truncated, printf format, ...). */
#define ts_fail(...) (ts_record(__VA_ARGS__), -1)

static inline Py_ssize_t ts_remaining(const ts_cursor *c) { return c->end - c->pos; }

/* Fewer than `count` bytes remain for the field at the cursor. */
static int ts_short(ts_cursor *c, const char *field, long long count) {
    return ts_fail(c, field, c->pos, 1,
                   "needs %lld bytes but only %lld remain before the end of the enclosing "
                   "structure",
                   count, (long long)ts_remaining(c));
}

/* Raise TsFileScanError for the failure recorded in the cursor. `what` names the structure. */
static void ts_raise(const ts_cursor *c, const char *what) {
    long long offset = c->base + (long long)c->error_pos;
    PyObject *text = PyUnicode_FromFormat("%s field %s at offset %lld: %s", what, c->field,
                                          offset, c->message);
    PyObject *error = text ? PyObject_CallFunctionObjArgs(ts_error_type, text, NULL) : NULL;
    Py_XDECREF(text);
    if (!error)
        return;
    PyObject *values[4] = {PyUnicode_FromString(c->message), PyUnicode_FromString(c->field),
                           PyLong_FromLongLong(offset), PyBool_FromLong(c->truncated)};
    static const char *names[4] = {"message", "field", "offset", "truncated"};
    int failed = 0;
    for (int i = 0; i < 4; i++) {
        failed = failed || !values[i] || PyObject_SetAttrString(error, names[i], values[i]) < 0;
        Py_XDECREF(values[i]);
    }
    if (!failed)
        PyErr_SetObject(ts_error_type, error);
    Py_DECREF(error);
}

/* LEB128 of at most 5 bytes, minimally encoded, at most `limit` (Java's readUnsignedVarInt). */
static int ts_leb128(ts_cursor *c, const char *field, u64 limit, u64 *out) {
    Py_ssize_t start = c->pos;
    u64 value = 0;
    for (int i = 0; i < 5; i++) {
        if (c->pos >= c->end)
            return ts_fail(c, field, start, 1, "truncated varint");
        u8 byte = c->data[c->pos++];
        value |= (u64)(byte & 0x7F) << (7 * i);
        if (!(byte & 0x80)) {
            if (byte == 0 && i > 0)
                return ts_fail(c, field, start, 0, "overlong varint (non-minimal encoding)");
            if (value > limit)
                return ts_fail(c, field, start, 0, "varint %llu exceeds %s", value,
                               limit == (u64)TS_INT32_MAX ? "2**31 - 1" : "32 bits");
            *out = value;
            return 0;
        }
    }
    return ts_fail(c, field, start, 0, "overlong varint (more than 5 bytes)");
}

static int ts_uvarint(ts_cursor *c, const char *field, long long *out) {
    u64 value;
    if (ts_leb128(c, field, (u64)TS_INT32_MAX, &value))
        return -1;
    *out = (long long)value;
    return 0;
}

/* Zig-zag varint (Java writeVarInt): 32 bits on the wire. */
static int ts_varint(ts_cursor *c, const char *field, long long *out) {
    u64 value;
    if (ts_leb128(c, field, 0xFFFFFFFFull, &value))
        return -1;
    *out = (long long)(value >> 1) ^ -(long long)(value & 1);
    return 0;
}

static int ts_take(ts_cursor *c, const char *field, long long count) {
    if (count < 0)
        return ts_fail(c, field, c->pos, 0, "negative length %lld", count);
    if (count > (long long)ts_remaining(c))
        return ts_short(c, field, count);
    c->pos += (Py_ssize_t)count;
    return 0;
}

static int ts_u8(ts_cursor *c, const char *field, long long *out) {
    if (ts_remaining(c) < 1)
        return ts_short(c, field, 1);
    *out = c->data[c->pos++];
    return 0;
}

static int ts_i32(ts_cursor *c, const char *field, long long *out) {
    if (ts_remaining(c) < 4)
        return ts_short(c, field, 4);
    const u8 *p = c->data + c->pos;
    *out = (int32_t)(((u32)p[0] << 24) | ((u32)p[1] << 16) | ((u32)p[2] << 8) | (u32)p[3]);
    c->pos += 4;
    return 0;
}

static int ts_i64(ts_cursor *c, const char *field, long long *out) {
    if (ts_remaining(c) < 8)
        return ts_short(c, field, 8);
    u64 value = 0;
    for (int i = 0; i < 8; i++)
        value = (value << 8) | c->data[c->pos + i];
    *out = (long long)value;
    c->pos += 8;
    return 0;
}

/* Strict UTF-8, as Python's "utf-8" codec decodes it (no overlong forms, no surrogates, at
 * most U+10FFFF, no truncated sequence): NULL when s[0:n] is valid, else the codec's reason. */
static const char *ts_utf8_error(const u8 *s, Py_ssize_t n) {
    Py_ssize_t i = 0;
    while (i < n) {
        u8 lead = s[i];
        if (lead < 0x80) {
            i++;
            continue;
        }
        Py_ssize_t need;
        u8 low = 0x80, high = 0xBF;
        if (lead >= 0xC2 && lead <= 0xDF)
            need = 1;
        else if (lead == 0xE0)
            need = 2, low = 0xA0;
        else if ((lead >= 0xE1 && lead <= 0xEC) || lead == 0xEE || lead == 0xEF)
            need = 2;
        else if (lead == 0xED)
            need = 2, high = 0x9F;
        else if (lead == 0xF0)
            need = 3, low = 0x90;
        else if (lead >= 0xF1 && lead <= 0xF3)
            need = 3;
        else if (lead == 0xF4)
            need = 3, high = 0x8F;
        else
            return "invalid start byte";
        for (Py_ssize_t j = 1; j <= need; j++) {
            if (i + j >= n)
                return "unexpected end of data";
            u8 byte = s[i + j];
            if (byte < (j == 1 ? low : 0x80) || byte > (j == 1 ? high : 0xBF))
                return "invalid continuation byte";
        }
        i += need + 1;
    }
    return NULL;
}

/* A string of `length` bytes at the cursor, located by start and length_out. Length -1 is a
 * null string: start -1 when null_message is NULL, else an error with that message. */
static int ts_string_body(ts_cursor *c, const char *field, Py_ssize_t length_pos, long long length,
                          const char *null_message, Py_ssize_t *start, Py_ssize_t *length_out) {
    if (length == -1) {
        if (null_message)
            return ts_fail(c, field, length_pos, 0, "%s", null_message);
        *start = -1;
        *length_out = 0;
        return 0;
    }
    if (length < 0)
        return ts_fail(c, field, length_pos, 0, "negative string length %lld", length);
    Py_ssize_t begin = c->pos;
    if (ts_take(c, field, length))
        return -1;
    const char *reason = ts_utf8_error(c->data + begin, (Py_ssize_t)length);
    if (reason)
        return ts_fail(c, field, length_pos, 0, "invalid UTF-8 (%s)", reason);
    *start = begin;
    *length_out = (Py_ssize_t)length;
    return 0;
}

/* Zig-zag length + UTF-8 bytes (ReadWriteIOUtils.writeVar). */
static int ts_varstr(ts_cursor *c, const char *field, const char *null_message, Py_ssize_t *start,
                     Py_ssize_t *length) {
    Py_ssize_t length_pos = c->pos;
    long long value;
    if (ts_varint(c, field, &value))
        return -1;
    return ts_string_body(c, field, length_pos, value, null_message, start, length);
}

/* Big-endian i32 length + UTF-8 bytes (table schema columns). */
static int ts_i32str(ts_cursor *c, const char *field, const char *null_message, Py_ssize_t *start,
                     Py_ssize_t *length) {
    Py_ssize_t length_pos = c->pos;
    long long value;
    if (ts_i32(c, field, &value))
        return -1;
    return ts_string_body(c, field, length_pos, value, null_message, start, length);
}

/* An element count whose elements take at least `min_size` bytes each must fit. */
static int ts_count(ts_cursor *c, const char *field, long long min_size, int zigzag,
                    long long *out) {
    Py_ssize_t count_pos = c->pos;
    long long count;
    if (zigzag ? ts_varint(c, field, &count) : ts_uvarint(c, field, &count))
        return -1;
    if (count < 0)
        return ts_fail(c, field, count_pos, 0, "negative count %lld", count);
    if (count * min_size > (long long)ts_remaining(c))
        return ts_fail(c, field, count_pos, 1, "count %lld cannot fit in the %lld bytes that remain",
                       count, (long long)ts_remaining(c));
    *out = count;
    return 0;
}

/* The child bounds of a node (its offsets, then its end offset) must lie in [floor, limit] and
 * increase strictly (the first may equal floor). Writers serialize children before their
 * parent, so limit is the parent's position and a descent always terminates. The first bound
 * that breaks the rule is reported once the node has been read to its end. */
typedef struct {
    long long floor, limit, previous, bad_index, bad_value;
} ts_bounds;

static void ts_bound(ts_bounds *b, long long index, long long value) {
    if (b->bad_index < 0 &&
        (value < b->previous || value > b->limit || (index > 0 && value == b->previous))) {
        b->bad_index = index;
        b->bad_value = value;
    }
    b->previous = value;
}

static int ts_bounds_check(ts_cursor *c, const ts_bounds *b, long long count, Py_ssize_t node) {
    if (b->bad_index < 0)
        return 0;
    return ts_fail(c, b->bad_index < count ? "index_node.offset" : "index_node.end_offset", node,
                   0,
                   "child offset %lld is out of order or outside [%lld, %lld] (children precede "
                   "their parent)",
                   b->bad_value, b->floor, b->limit);
}

static int ts_node_type(ts_cursor *c, int device_level, long long *type) {
    Py_ssize_t type_pos = c->pos;
    if (ts_u8(c, "index_node.type", type))
        return -1;
    if (device_level ? *type > 1 : (*type < 2 || *type > 3))
        return ts_fail(c, "index_node.type", type_pos, 0,
                       "node type %lld where a %s-level node is expected", *type,
                       device_level ? "device" : "measurement");
    return 0;
}

/* A device-level MetadataIndexNode: entries (device key, i64 child offset), i64 end offset, u8
 * type (0 or 1). The bounds are checked against [bounds->floor, bounds->limit] unless bounds
 * is NULL (TsFileMetadata is scanned once for its structure, then its roots again for their
 * bounds once meta_offset is known). */
static int ts_device_node(ts_cursor *c, int segmented, ts_bounds *bounds) {
    Py_ssize_t position = c->pos;
    long long count = 0, offset, type = 0;
    Py_ssize_t start, length;
    if (ts_count(c, "index_node.entry_count", 9, 0, &count))
        return -1;
    for (long long i = 0; i <= count; i++) {
        if (i < count && segmented) {
            Py_ssize_t key_pos = c->pos;
            long long segments;
            if (ts_count(c, "index_node.segment_count", 1, 0, &segments))
                return -1;
            if (segments == 0)
                return ts_fail(c, "index_node.device", key_pos, 0, "device ID has no segments");
            for (long long s = 0; s < segments; s++)
                if (ts_varstr(c, "index_node.device", NULL, &start, &length))
                    return -1;
        } else if (i < count &&
                   ts_varstr(c, "index_node.device", "index key is null", &start, &length)) {
            return -1;
        }
        if (ts_i64(c, i < count ? "index_node.offset" : "index_node.end_offset", &offset))
            return -1;
        if (bounds)
            ts_bound(bounds, i, offset);
    }
    if (ts_node_type(c, 1, &type))
        return -1;
    return bounds ? ts_bounds_check(c, bounds, count, position) : 0;
}

static PyObject *ts_text(const ts_cursor *c, Py_ssize_t start, Py_ssize_t length) {
    if (start < 0)
        Py_RETURN_NONE;
    return PyUnicode_DecodeUTF8((const char *)c->data + start, length, "strict");
}

/* One TableSchema: name, columns (i32-length name, data type, encoding, compressor, i32
 * property count and i32-length key/value pairs, i32 category). Sets schemas[name] to a tuple
 * of (name, data_type, encoding, compressor, category, properties) per column unless schemas
 * is NULL. Returns 0, -1 (format error) or -2 (Python error set). */
static int ts_table_schema(ts_cursor *c, PyObject *schemas) {
    Py_ssize_t start, length, name_start, name_length;
    long long columns, properties, category, type[3];
    if (ts_varstr(c, "table_schema.name", "table name is null", &name_start, &name_length))
        return -1;
    if (ts_count(c, "table_schema.column_count", 15, 0, &columns))
        return -1;
    /* columns * 15 <= the bytes that remain: the tuple is bounded by the input. */
    PyObject *tuple = schemas ? PyTuple_New((Py_ssize_t)columns) : NULL, *props = NULL;
    if (schemas && !tuple)
        return -2;
    int status = -1;
    for (long long i = 0; i < columns; i++) {
        Py_ssize_t column_start, column_length;
        if (ts_i32str(c, "column.name", "column name is null", &column_start, &column_length))
            goto failed;
        if (ts_u8(c, "column.data_type", &type[0]) || ts_u8(c, "column.encoding", &type[1]) ||
            ts_u8(c, "column.compressor", &type[2]))
            goto failed;
        Py_ssize_t count_pos = c->pos;
        if (ts_i32(c, "column.property_count", &properties))
            goto failed;
        if (properties < 0 || properties > (long long)(ts_remaining(c) / 8)) {
            ts_record(c, "column.property_count", count_pos, 0,
                      "property count %lld is negative or cannot fit", properties);
            goto failed;
        }
        props = schemas ? PyDict_New() : NULL;
        if (schemas && !props)
            goto python_error;
        for (long long p = 0; p < properties; p++) {
            Py_ssize_t value_start, value_length;
            if (ts_i32str(c, "column.property_key", NULL, &start, &length) ||
                ts_i32str(c, "column.property_value", NULL, &value_start, &value_length))
                goto failed;
            if (!schemas)
                continue;
            PyObject *key = start < 0 ? PyUnicode_FromStringAndSize("", 0)
                                      : ts_text(c, start, length);
            PyObject *value = key ? ts_text(c, value_start, value_length) : NULL;
            int set_failed = !value || PyDict_SetItem(props, key, value) < 0;
            Py_XDECREF(key);
            Py_XDECREF(value);
            if (set_failed)
                goto python_error;
        }
        if (ts_i32(c, "column.category", &category))
            goto failed;
        if (!schemas)
            continue;
        PyObject *column = Py_BuildValue("(NLLLLN)", ts_text(c, column_start, column_length),
                                         type[0], type[1], type[2], category, props);
        props = NULL; /* Py_BuildValue took it, even on failure */
        if (!column)
            goto python_error;
        PyTuple_SET_ITEM(tuple, (Py_ssize_t)i, column);
    }
    if (!schemas)
        return 0;
    PyObject *name = ts_text(c, name_start, name_length);
    status = !name || PyDict_SetItem(schemas, name, tuple) < 0 ? -2 : 0;
    Py_XDECREF(name);
    Py_DECREF(tuple);
    return status;
python_error:
    status = -2;
failed:
    Py_XDECREF(props);
    Py_XDECREF(tuple);
    return status;
}

/* Filter and properties, after meta_offset. Fills out[0..5]; collects the properties into the
 * dict `properties` unless it is NULL. Returns 0, -1 (format, see the cursor) or -2 (Python
 * error set). Java reads the v4 filter and properties only "if the buffer has remaining
 * bytes"; v3 always stores bit_count and k, even after byte_length 0. */
static int ts_filter_and_properties(ts_cursor *c, int version, long long *out,
                                    PyObject *properties) {
    out[0] = c->pos; /* filter_start */
    out[1] = c->pos; /* bits_start */
    out[2] = out[3] = out[4] = 0;
    if (version == 3 || ts_remaining(c) > 0) {
        Py_ssize_t length_pos = c->pos;
        long long byte_length, bit_count, k;
        if (ts_uvarint(c, "bloom_filter.byte_length", &byte_length))
            return -1;
        if (byte_length > (long long)ts_remaining(c))
            return ts_fail(c, "bloom_filter.bits", c->pos, 0,
                           "bit vector of %lld bytes crosses the TsFileMetadata boundary (%lld "
                           "bytes remain)",
                           byte_length, (long long)ts_remaining(c));
        out[1] = c->pos;
        c->pos += (Py_ssize_t)byte_length;
        if (byte_length > 0 || version == 3) {
            Py_ssize_t count_pos = c->pos;
            if (ts_uvarint(c, "bloom_filter.bit_count", &bit_count))
                return -1;
            Py_ssize_t hash_pos = c->pos;
            if (ts_uvarint(c, "bloom_filter.hash_function_count", &k))
                return -1;
            if (byte_length > 0) {
                if (bit_count <= 0)
                    return ts_fail(c, "bloom_filter.bit_count", count_pos, 0,
                                   "bit_count must be positive, got 0");
                if (k < 1 || k > TS_MAX_HASH_FUNCTIONS)
                    return ts_fail(c, "bloom_filter.hash_function_count", hash_pos, 0,
                                   "hash_function_count must be in 1..%d, got %lld",
                                   TS_MAX_HASH_FUNCTIONS, k);
                if (byte_length > (bit_count + 7) / 8)
                    return ts_fail(c, "bloom_filter.byte_length", length_pos, 0,
                                   "byte_length %lld exceeds ceil(bit_count / 8) = %lld",
                                   byte_length, (bit_count + 7) / 8);
                out[2] = byte_length;
                out[3] = bit_count;
                out[4] = k;
            }
        }
    }
    out[5] = c->pos; /* filter_end */
    if (version >= 4 && ts_remaining(c) > 0) {
        long long count;
        if (ts_count(c, "property_count", 2, 1, &count))
            return -1;
        for (long long i = 0; i < count; i++) {
            Py_ssize_t key_start, key_length, value_start, value_length;
            if (ts_varstr(c, "property_key", NULL, &key_start, &key_length) ||
                ts_varstr(c, "property_value", NULL, &value_start, &value_length))
                return -1;
            if (!properties)
                continue;
            PyObject *key = key_start < 0 ? PyUnicode_FromStringAndSize("", 0)
                                          : ts_text(c, key_start, key_length);
            PyObject *value = key ? ts_text(c, value_start, value_length) : NULL;
            int failed = !value || PyDict_SetItem(properties, key, value) < 0;
            Py_XDECREF(key);
            Py_XDECREF(value);
            if (failed)
                return -2;
        }
    }
    if (ts_remaining(c) > 0)
        return ts_fail(c, "TsFileMetadata end", c->pos, 0, "%lld unexpected bytes after the %s",
                       (long long)ts_remaining(c), version >= 4 ? "properties" : "Bloom filter");
    return 0;
}

/* Where the parts of a TsFileMetadata are (positions index the scanned buffer). */
typedef struct {
    Py_ssize_t schema_start;
    long long schema_count, meta_offset;
    long long filter[6]; /* filter_start, bits_start, byte_length, bit_count, k, filter_end */
} ts_layout;

/* The table names and root nodes at the cursor. Appends (name, root position) to `tables`
 * unless it is NULL; checks each root's bounds unless `bounds` is NULL (the floor and limit
 * are the same for every root). Returns 0, -1 (format error) or -2 (Python error set). */
static int ts_roots(ts_cursor *c, int version, PyObject *tables, const ts_bounds *bounds) {
    long long table_count = 1;
    if (version >= 4 && ts_count(c, "table_count", 3, 0, &table_count))
        return -1;
    for (long long i = 0; i < table_count; i++) {
        Py_ssize_t name_start = 0, name_length = 0;
        if (version >= 4 &&
            ts_varstr(c, "table_name", "table name is null", &name_start, &name_length))
            return -1;
        Py_ssize_t root = c->pos;
        ts_bounds root_bounds = bounds ? *bounds : (ts_bounds){0};
        if (ts_device_node(c, version >= 4, bounds ? &root_bounds : NULL))
            return -1;
        if (!tables)
            continue;
        PyObject *name = ts_text(c, name_start, name_length);
        PyObject *entry = name ? Py_BuildValue("(Nn)", name, root) : NULL;
        int failed = !entry || PyList_Append(tables, entry) < 0;
        Py_XDECREF(entry);
        if (failed)
            return -2;
    }
    return 0;
}

/* Scan the TsFileMetadata at c->pos .. c->end (version 3 or 4): the roots' structure, the
 * schemas, meta_offset, then the roots' bounds (children lie in [meta_offset, metadata start]),
 * the filter and the properties. Appends (name, root position) to `tables` and fills
 * `schemas` (see ts_table_schema) and `properties` unless they are NULL. Returns 0, -1 (format error, see the cursor) or -2
 * (Python error set). */
static int ts_scan(ts_cursor *c, int version, PyObject *tables, PyObject *schemas,
                   PyObject *properties, ts_layout *layout) {
    Py_ssize_t metadata_pos = c->pos;
    layout->schema_count = 0;
    int status = ts_roots(c, version, tables, NULL);
    if (status)
        return status;
    layout->schema_start = c->pos;
    if (version >= 4) {
        if (ts_count(c, "table_schema_count", 2, 0, &layout->schema_count))
            return -1;
        layout->schema_start = c->pos;
        for (long long i = 0; i < layout->schema_count; i++)
            if ((status = ts_table_schema(c, schemas)) != 0)
                return status;
    }
    Py_ssize_t meta_pos = c->pos;
    if (ts_i64(c, "meta_offset", &layout->meta_offset))
        return -1;
    long long metadata_start = c->base + metadata_pos;
    if (layout->meta_offset < TS_HEAD_SIZE || layout->meta_offset > metadata_start)
        return ts_fail(c, "meta_offset", meta_pos, 0,
                       "meta_offset %lld is not between the head and TsFileMetadata",
                       layout->meta_offset);
    ts_cursor again = *c;
    again.pos = metadata_pos;
    ts_bounds bounds = {.floor = layout->meta_offset,
                        .limit = metadata_start,
                        .previous = layout->meta_offset,
                        .bad_index = -1};
    if (ts_roots(&again, version, NULL, &bounds)) {
        *c = again;
        return -1;
    }
    return ts_filter_and_properties(c, version, layout->filter, properties);
}

/* tsfile_scan_metadata(data, start, end, version, base[, schemas]) -> (tables, schema_start,
 * schema_count, meta_offset, filter_start, bits_start, byte_length, bit_count, k, filter_end,
 * properties). data[start:end] is TsFileMetadata, data[0] sits at file offset base; returned
 * positions index data. tables lists (table name, root node position); byte_length, bit_count
 * and k are 0 when the file has no filter. v3 has one table named "" and no schemas or
 * properties. The dict `schemas`, when given, receives table name -> tuple of columns, each
 * (name, data_type, encoding, compressor, category, properties). Raises TsFileScanError on bad
 * bytes. */
PyObject *py_tsfile_scan_metadata(PyObject *self, PyObject *args) {
    Py_buffer view;
    Py_ssize_t start, end;
    int version;
    long long base;
    PyObject *schemas = NULL;
    if (!PyArg_ParseTuple(args, "y*nniL|O!", &view, &start, &end, &version, &base, &PyDict_Type,
                          &schemas))
        return NULL;
    PyObject *tables = NULL, *properties = NULL, *result = NULL;
    if (start < 0 || end < start || end > view.len || (version != 3 && version != 4) ||
        base < 0 || base > (long long)1 << 62) {
        PyErr_SetString(PyExc_ValueError, "bad arguments: need 0 <= start <= end <= len(data), "
                                          "version 3 or 4, 0 <= base < 2**62");
        goto done;
    }
    tables = PyList_New(0);
    properties = PyDict_New();
    if (!tables || !properties)
        goto done;
    ts_cursor c = {.data = (const u8 *)view.buf, .pos = start, .end = end, .base = base};
    ts_layout layout;
    int status = ts_scan(&c, version, tables, schemas, properties, &layout);
    if (status == -1)
        ts_raise(&c, "TsFileMetadata");
    if (status == 0)
        result = Py_BuildValue("(OnLLLLLLLLO)", tables, layout.schema_start, layout.schema_count,
                               layout.meta_offset, layout.filter[0], layout.filter[1],
                               layout.filter[2], layout.filter[3], layout.filter[4],
                               layout.filter[5], properties);
done:
    Py_XDECREF(tables);
    Py_XDECREF(properties);
    PyBuffer_Release(&view);
    return result;
}

/* One key of a MetadataIndexNode of `kind` at the cursor: a name, a 1-tuple (v3 device) or a
 * tuple of segments, None for a null one (v4 device). NULL with *status -1 (format error) or
 * -2 (Python error set). */
static PyObject *ts_index_key(ts_cursor *c, int kind, int *status) {
    Py_ssize_t start, length;
    *status = -1;
    if (kind != TSFILE_KEY_DEVICE_V4) {
        const char *field =
            kind == TSFILE_KEY_MEASUREMENT ? "index_node.measurement" : "index_node.device";
        if (ts_varstr(c, field, "index key is null", &start, &length))
            return NULL;
        *status = -2;
        PyObject *name = ts_text(c, start, length);
        if (!name || kind == TSFILE_KEY_MEASUREMENT)
            return name;
        PyObject *key = PyTuple_Pack(1, name);
        Py_DECREF(name);
        return key;
    }
    Py_ssize_t key_pos = c->pos;
    long long segments;
    if (ts_count(c, "index_node.segment_count", 1, 0, &segments))
        return NULL;
    if (segments == 0) {
        ts_record(c, "index_node.device", key_pos, 0, "device ID has no segments");
        return NULL;
    }
    /* segments <= the bytes that remain: the tuple is bounded by the input. */
    PyObject *key = PyTuple_New((Py_ssize_t)segments);
    if (!key) {
        *status = -2;
        return NULL;
    }
    for (long long s = 0; s < segments; s++) {
        if (ts_varstr(c, "index_node.device", NULL, &start, &length)) {
            Py_DECREF(key);
            return NULL;
        }
        PyObject *segment = ts_text(c, start, length);
        if (!segment) {
            *status = -2;
            Py_DECREF(key);
            return NULL;
        }
        PyTuple_SET_ITEM(key, (Py_ssize_t)s, segment);
    }
    return key;
}

/* tsfile_index_node(data, pos, key_kind, floor, limit, base) -> (keys, offsets, end_offset,
 * node_type, end_pos): one MetadataIndexNode at data[pos:]. key_kind is one of the
 * TSFILE_KEY_* constants: measurement level (keys are names), v3 device level (keys are
 * 1-tuples), v4 device level (keys are tuples of segments, None for a null segment). Child
 * offsets and the end offset must increase strictly within [floor, limit]. data[0] sits at file
 * offset base (for error offsets). Raises TsFileScanError on bad bytes (truncated set when
 * data ends inside the node: a caller reading a prefix widens it). */
PyObject *py_tsfile_index_node(PyObject *self, PyObject *args) {
    Py_buffer view;
    Py_ssize_t pos;
    int kind;
    long long floor_offset, limit, base;
    if (!PyArg_ParseTuple(args, "y*niLLL", &view, &pos, &kind, &floor_offset, &limit, &base))
        return NULL;
    PyObject *keys = NULL, *offsets = NULL, *result = NULL;
    if (pos < 0 || pos > view.len || kind < TSFILE_KEY_MEASUREMENT || kind > TSFILE_KEY_DEVICE_V4 ||
        base < 0 || base > (long long)1 << 62) {
        PyErr_SetString(PyExc_ValueError, "bad arguments: need 0 <= pos <= len(data), "
                                          "key_kind 0..2, 0 <= base < 2**62");
        goto done;
    }
    ts_cursor c = {.data = (const u8 *)view.buf, .pos = pos, .end = view.len, .base = base};
    ts_bounds bounds = {
        .floor = floor_offset, .limit = limit, .previous = floor_offset, .bad_index = -1};
    long long count = 0, offset, node_type = 0;
    int status = -1;
    if (ts_count(&c, "index_node.entry_count", 9, 0, &count))
        goto format_error;
    /* count * 9 <= the bytes that remain: the tuples are bounded by the input. */
    keys = PyTuple_New((Py_ssize_t)count);
    offsets = PyTuple_New((Py_ssize_t)count);
    if (!keys || !offsets)
        goto done;
    for (long long i = 0; i <= count; i++) {
        if (i < count) {
            PyObject *key = ts_index_key(&c, kind, &status);
            if (!key)
                goto failed;
            PyTuple_SET_ITEM(keys, (Py_ssize_t)i, key);
        }
        if (ts_i64(&c, i < count ? "index_node.offset" : "index_node.end_offset", &offset))
            goto format_error;
        ts_bound(&bounds, i, offset);
        if (i < count) {
            PyObject *number = PyLong_FromLongLong(offset);
            if (!number)
                goto done;
            PyTuple_SET_ITEM(offsets, (Py_ssize_t)i, number);
        }
    }
    if (ts_node_type(&c, kind != TSFILE_KEY_MEASUREMENT, &node_type) ||
        ts_bounds_check(&c, &bounds, count, pos))
        goto format_error;
    result = Py_BuildValue("(OOLLn)", keys, offsets, bounds.previous, node_type, c.pos);
    goto done;
failed:
    if (status == -2)
        goto done;
format_error:
    ts_raise(&c, "MetadataIndexNode");
done:
    Py_XDECREF(keys);
    Py_XDECREF(offsets);
    PyBuffer_Release(&view);
    return result;
}

int tsfile_scan_add_types(PyObject *module) {
    ts_error_type = PyErr_NewExceptionWithDoc(
        "bloomskip._native.TsFileScanError",
        "Bad TsFile metadata bytes: str() says where; the attributes message, field, offset "
        "(in the file) and truncated (the bytes ended inside the field) say it to a program.",
        PyExc_ValueError, NULL);
    if (!ts_error_type)
        return -1;
    Py_INCREF(ts_error_type);
    if (PyModule_AddObject(module, "TsFileScanError", ts_error_type) < 0) {
        Py_DECREF(ts_error_type);
        return -1;
    }
    return 0;
}

/* tsfile_tail_verdict(tail, head, size, path, signed_tails) -> int: test a series path against
 * the Bloom filter of a file from its last bytes alone (find over thousands of files). tail is
 * the last len(tail) bytes of a file of `size` bytes, head its first 7 bytes (or more). The path
 * is hashed with each tail variant of signed_tails (a sequence of bools) by the same kernels as
 * bloomskip.bits. Returns 0 when the filter rules the path out under every variant, 1 when it
 * may hold it, and -1 when the caller must read the file itself: no filter, a metadata larger
 * than the tail, or anything malformed (the reader then raises the scan's error). */
PyObject *py_tsfile_tail_verdict(PyObject *self, PyObject *args) {
    HELD(held, 3);
    Py_buffer *tail = &held.view[0], *head = &held.view[1], *path = &held.view[2];
    long long size;
    PyObject *variants;
    if (!PyArg_ParseTuple(args, "y*y*Ly*O", tail, head, &size, path, &variants))
        return NULL;
    held.count = 3;
    long verdict = -1;
    int signed_tails[2], variant_count = 0;
    PyObject *sequence = PySequence_Fast(variants, "signed_tails must be a sequence of bools");
    if (!sequence)
        return held_release(&held, NULL);
    if (PySequence_Fast_GET_SIZE(sequence) < 1 || PySequence_Fast_GET_SIZE(sequence) > 2) {
        Py_DECREF(sequence);
        PyErr_SetString(PyExc_ValueError, "signed_tails must hold one or two variants");
        return held_release(&held, NULL);
    }
    for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(sequence); i++) {
        int flag = PyObject_IsTrue(PySequence_Fast_GET_ITEM(sequence, i));
        if (flag < 0) {
            Py_DECREF(sequence);
            return held_release(&held, NULL);
        }
        signed_tails[variant_count++] = flag;
    }
    Py_DECREF(sequence);
    const u8 *t = (const u8 *)tail->buf, *h = (const u8 *)head->buf;
    Py_ssize_t tail_length = tail->len;
    /* The envelope: both magics, the version, a metadata size that fits and lies in the tail. */
    if (size < TS_HEAD_SIZE + 10 || size > (long long)1 << 62 || tail_length < 10 ||
        tail_length > size || head->len < TS_HEAD_SIZE || memcmp(h, "TsFile", 6) != 0 ||
        (h[6] != 3 && h[6] != 4) || memcmp(t + tail_length - 6, "TsFile", 6) != 0)
        goto answer;
    long long tail_start = size - tail_length;
    const u8 *size_bytes = t + tail_length - 10;
    long long metadata_size = (int32_t)(((u32)size_bytes[0] << 24) | ((u32)size_bytes[1] << 16) |
                                        ((u32)size_bytes[2] << 8) | (u32)size_bytes[3]);
    long long metadata_end = size - 10, metadata_start = metadata_end - metadata_size;
    if (metadata_size < 0 || metadata_start < TS_HEAD_SIZE || metadata_start < tail_start)
        goto answer;
    ts_cursor c = {.data = t, .pos = (Py_ssize_t)(metadata_start - tail_start),
                   .end = (Py_ssize_t)(metadata_end - tail_start), .base = tail_start};
    ts_layout layout;
    if (ts_scan(&c, h[6], NULL, NULL, NULL, &layout) != 0 || layout.filter[2] == 0)
        goto answer;
    {
        const u8 *bits = t + layout.filter[1];
        long long byte_length = layout.filter[2], bit_count = layout.filter[3];
        long long k = layout.filter[4];
        verdict = 0;
        for (int v = 0; v < variant_count && !verdict; v++) {
            int hit = 1;
            for (long long j = 0; j < k && hit; j++) {
                u64 position = tsfile_index(tsfile_hash32((const u8 *)path->buf, (size_t)path->len,
                                                          TSFILE_SEEDS[j], signed_tails[v]),
                                            (u64)bit_count);
                hit = (long long)(position >> 3) < byte_length &&
                      (bits[position >> 3] >> (position & 7)) & 1;
            }
            verdict = hit;
        }
    }
answer:
    return held_release(&held, PyLong_FromLong(verdict));
}
