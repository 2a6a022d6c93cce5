/*
 * TsFile metadata scanning.
 *
 * tsfile_scan_metadata walks one serialized TsFileMetadata (format v3 or v4) and says where
 * its parts sit, so that testing the Bloom filter of thousands of files builds no Python
 * object per table root, schema or column. It checks every rule the careful Python parser
 * (bloomskip.tsfile.reader) checks, and validates the table root nodes in full (which Python
 * defers to their first use): every length is checked against the bytes that remain before
 * anything is read, and nothing is allocated from a length the input claims. On bad input it
 * raises ValueError naming the field and the file offset; bloomskip.tsfile then re-parses
 * with the Python reader, which raises the FormatError.
 */
#include "tsfile_scan.h"

#include "buffers.h"
#include "hash.h"

#define TS_HEAD_SIZE 7 /* "TsFile" + version byte */
#define TS_INT32_MAX 2147483647LL
#define TS_MAX_HASH_FUNCTIONS 8

typedef struct {
    const u8 *data;
    Py_ssize_t pos, end; /* the metadata is data[pos:end] */
    long long base;      /* file offset of data[0] */
    const char *field;   /* set by ts_fail */
    const char *message;
    Py_ssize_t error_pos;
} ts_cursor;

static int ts_fail(ts_cursor *c, const char *field, Py_ssize_t pos, const char *message) {
    c->field = field;
    c->message = message;
    c->error_pos = pos;
    return -1;
}

static inline Py_ssize_t ts_remaining(const ts_cursor *c) { return c->end - c->pos; }

/* LEB128 of at most 5 bytes, minimally encoded, at most `limit` (Java's readUnsignedVarInt). */
static int ts_leb128(ts_cursor *c, const char *field, u64 limit, u64 *out) {
    Py_ssize_t start = c->pos;
    u64 value = 0;
    for (int i = 0; i < 5; i++) {
        if (c->pos >= c->end)
            return ts_fail(c, field, start, "truncated varint");
        u8 byte = c->data[c->pos++];
        value |= (u64)(byte & 0x7F) << (7 * i);
        if (!(byte & 0x80)) {
            if (byte == 0 && i > 0)
                return ts_fail(c, field, start, "overlong varint (non-minimal encoding)");
            if (value > limit)
                return ts_fail(c, field, start, "varint out of range");
            *out = value;
            return 0;
        }
    }
    return ts_fail(c, field, start, "overlong varint (more than 5 bytes)");
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
        return ts_fail(c, field, c->pos, "negative length");
    if (count > (long long)ts_remaining(c))
        return ts_fail(c, field, c->pos, "length runs past the end of TsFileMetadata");
    c->pos += (Py_ssize_t)count;
    return 0;
}

static int ts_i32(ts_cursor *c, const char *field, long long *out) {
    if (ts_remaining(c) < 4)
        return ts_fail(c, field, c->pos, "truncated i32");
    const u8 *p = c->data + c->pos;
    *out = (int32_t)(((u32)p[0] << 24) | ((u32)p[1] << 16) | ((u32)p[2] << 8) | (u32)p[3]);
    c->pos += 4;
    return 0;
}

static int ts_i64(ts_cursor *c, const char *field, long long *out) {
    if (ts_remaining(c) < 8)
        return ts_fail(c, field, c->pos, "truncated i64");
    u64 value = 0;
    for (int i = 0; i < 8; i++)
        value = (value << 8) | c->data[c->pos + i];
    *out = (long long)value;
    c->pos += 8;
    return 0;
}

/* Strict UTF-8, as Python's "utf-8" codec decodes it: no overlong forms, no surrogates, at most
 * U+10FFFF, no truncated sequence. */
static int ts_utf8_valid(const u8 *s, Py_ssize_t n) {
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
            return 0;
        if (n - i - 1 < need || s[i + 1] < low || s[i + 1] > high)
            return 0;
        for (Py_ssize_t j = 2; j <= need; j++)
            if ((s[i + j] & 0xC0) != 0x80)
                return 0;
        i += need + 1;
    }
    return 1;
}

/* A string of `length` bytes at the cursor (length -1: null), located by start and length_out. */
static int ts_string_body(ts_cursor *c, const char *field, Py_ssize_t length_pos, long long length,
                          int nullable, Py_ssize_t *start, Py_ssize_t *length_out) {
    if (length == -1) {
        if (!nullable)
            return ts_fail(c, field, length_pos, "null string");
        *start = -1;
        *length_out = 0;
        return 0;
    }
    if (length < 0)
        return ts_fail(c, field, length_pos, "negative string length");
    Py_ssize_t begin = c->pos;
    if (ts_take(c, field, length))
        return -1;
    if (!ts_utf8_valid(c->data + begin, (Py_ssize_t)length))
        return ts_fail(c, field, length_pos, "invalid UTF-8");
    *start = begin;
    *length_out = (Py_ssize_t)length;
    return 0;
}

/* Zig-zag length + UTF-8 bytes (ReadWriteIOUtils.writeVar). */
static int ts_varstr(ts_cursor *c, const char *field, int nullable, Py_ssize_t *start,
                     Py_ssize_t *length) {
    Py_ssize_t length_pos = c->pos;
    long long value;
    if (ts_varint(c, field, &value))
        return -1;
    return ts_string_body(c, field, length_pos, value, nullable, start, length);
}

/* Big-endian i32 length + UTF-8 bytes (table schema columns). */
static int ts_i32str(ts_cursor *c, const char *field, int nullable, Py_ssize_t *start,
                     Py_ssize_t *length) {
    Py_ssize_t length_pos = c->pos;
    long long value;
    if (ts_i32(c, field, &value))
        return -1;
    return ts_string_body(c, field, length_pos, value, nullable, start, length);
}

/* An element count whose elements take at least `min_size` bytes each must fit. */
static int ts_count(ts_cursor *c, const char *field, long long min_size, int zigzag,
                    long long *out) {
    Py_ssize_t count_pos = c->pos;
    long long count;
    if (zigzag ? ts_varint(c, field, &count) : ts_uvarint(c, field, &count))
        return -1;
    if (count < 0)
        return ts_fail(c, field, count_pos, "negative count");
    if (count * min_size > (long long)ts_remaining(c))
        return ts_fail(c, field, count_pos, "count cannot fit in the bytes that remain");
    *out = count;
    return 0;
}

/* A device-level MetadataIndexNode: entries (device key, i64 child offset), i64 end offset, u8
 * type (0 or 1). Child offsets must increase strictly; *first and *last return the first child
 * offset and the end offset, which the caller checks against [meta_offset, metadata start]. */
static int ts_device_node(ts_cursor *c, int segmented, long long *first, long long *last) {
    Py_ssize_t position = c->pos;
    long long count, previous = 0, offset, type;
    Py_ssize_t start, length;
    if (ts_count(c, "index_node.entry_count", 9, 0, &count))
        return -1;
    for (long long i = 0; i < count; i++) {
        if (segmented) {
            Py_ssize_t key_pos = c->pos;
            long long segments;
            if (ts_count(c, "index_node.segment_count", 1, 0, &segments))
                return -1;
            if (segments == 0)
                return ts_fail(c, "index_node.device", key_pos, "device ID has no segments");
            for (long long s = 0; s < segments; s++)
                if (ts_varstr(c, "index_node.device", 1, &start, &length))
                    return -1;
        } else if (ts_varstr(c, "index_node.device", 0, &start, &length)) {
            return -1;
        }
        if (ts_i64(c, "index_node.offset", &offset))
            return -1;
        if (i == 0)
            *first = offset;
        else if (offset <= previous)
            return ts_fail(c, "index_node.offset", position, "child offsets out of order");
        previous = offset;
    }
    if (ts_i64(c, "index_node.end_offset", &offset))
        return -1;
    if (count == 0)
        *first = offset;
    else if (offset <= previous)
        return ts_fail(c, "index_node.end_offset", position, "end offset out of order");
    *last = offset;
    Py_ssize_t type_pos = c->pos;
    if (ts_remaining(c) < 1)
        return ts_fail(c, "index_node.type", type_pos, "truncated node type");
    type = c->data[c->pos++];
    if (type != 0 && type != 1)
        return ts_fail(c, "index_node.type", type_pos, "not a device-level node type");
    return 0;
}

/* One TableSchema: name, columns (i32-length name, data type, encoding, compressor, i32
 * property count and i32-length key/value pairs, i32 category). */
static int ts_table_schema(ts_cursor *c) {
    Py_ssize_t start, length;
    long long columns, properties, value;
    if (ts_varstr(c, "table_schema.name", 0, &start, &length))
        return -1;
    if (ts_count(c, "table_schema.column_count", 15, 0, &columns))
        return -1;
    for (long long i = 0; i < columns; i++) {
        if (ts_i32str(c, "column.name", 0, &start, &length))
            return -1;
        if (ts_take(c, "column.data_type", 3))
            return -1;
        Py_ssize_t count_pos = c->pos;
        if (ts_i32(c, "column.property_count", &properties))
            return -1;
        if (properties < 0 || properties > (long long)(ts_remaining(c) / 8))
            return ts_fail(c, "column.property_count", count_pos,
                           "property count is negative or cannot fit");
        for (long long p = 0; p < properties; p++)
            if (ts_i32str(c, "column.property_key", 1, &start, &length) ||
                ts_i32str(c, "column.property_value", 1, &start, &length))
                return -1;
        if (ts_i32(c, "column.category", &value))
            return -1;
    }
    return 0;
}

static PyObject *ts_text(const ts_cursor *c, Py_ssize_t start, Py_ssize_t length) {
    if (start < 0)
        Py_RETURN_NONE;
    return PyUnicode_DecodeUTF8((const char *)c->data + start, length, "strict");
}

/* Filter and properties, after meta_offset. Fills out[0..5]; collects the properties into the
 * dict `properties` unless it is NULL. Returns 0, -1 (format, see the cursor) or -2 (Python
 * error set). */
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
            return ts_fail(c, "bloom_filter.bits", c->pos,
                           "bit vector crosses the TsFileMetadata boundary");
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
                    return ts_fail(c, "bloom_filter.bit_count", count_pos, "bit_count is 0");
                if (k < 1 || k > TS_MAX_HASH_FUNCTIONS)
                    return ts_fail(c, "bloom_filter.hash_function_count", hash_pos,
                                   "hash_function_count is not in 1..8");
                if (byte_length > (bit_count + 7) / 8)
                    return ts_fail(c, "bloom_filter.byte_length", length_pos,
                                   "byte_length exceeds ceil(bit_count / 8)");
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
            if (ts_varstr(c, "property_key", 1, &key_start, &key_length) ||
                ts_varstr(c, "property_value", 1, &value_start, &value_length))
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
        return ts_fail(c, "TsFileMetadata end", c->pos, "unexpected bytes after the metadata");
    return 0;
}

/* Where the parts of a TsFileMetadata are (positions index the scanned buffer). */
typedef struct {
    Py_ssize_t schema_start;
    long long schema_count, meta_offset;
    long long filter[6]; /* filter_start, bits_start, byte_length, bit_count, k, filter_end */
} ts_layout;

/* Scan the TsFileMetadata at c->pos .. c->end (version 3 or 4). Appends (name, root position) to
 * `tables` and fills `properties` unless they are NULL. Returns 0, -1 (format error, see the
 * cursor) or -2 (Python error set). */
static int ts_scan(ts_cursor *c, int version, PyObject *tables, PyObject *properties,
                   ts_layout *layout) {
    long long first_child = LLONG_MAX, last_child = LLONG_MIN, table_count = 1;
    Py_ssize_t metadata_pos = c->pos, first_child_pos = c->pos, last_child_pos = c->pos;
    layout->schema_count = 0;
    if (version >= 4 && ts_count(c, "table_count", 3, 0, &table_count))
        return -1;
    for (long long i = 0; i < table_count; i++) {
        Py_ssize_t name_start = 0, name_length = 0;
        if (version >= 4 && ts_varstr(c, "table_name", 0, &name_start, &name_length))
            return -1;
        Py_ssize_t root = c->pos;
        long long first = 0, last = 0; /* set by ts_device_node on success */
        if (ts_device_node(c, version >= 4, &first, &last))
            return -1;
        if (first < first_child)
            first_child = first, first_child_pos = root;
        if (last > last_child)
            last_child = last, last_child_pos = root;
        if (!tables)
            continue;
        PyObject *name = ts_text(c, name_start, name_length);
        PyObject *entry = name ? Py_BuildValue("(Nn)", name, root) : NULL;
        int failed = !entry || PyList_Append(tables, entry) < 0;
        Py_XDECREF(entry);
        if (failed)
            return -2;
    }
    layout->schema_start = c->pos;
    if (version >= 4) {
        if (ts_count(c, "table_schema_count", 2, 0, &layout->schema_count))
            return -1;
        layout->schema_start = c->pos;
        for (long long i = 0; i < layout->schema_count; i++)
            if (ts_table_schema(c))
                return -1;
    }
    Py_ssize_t meta_pos = c->pos;
    if (ts_i64(c, "meta_offset", &layout->meta_offset))
        return -1;
    long long metadata_start = c->base + metadata_pos;
    if (layout->meta_offset < TS_HEAD_SIZE || layout->meta_offset > metadata_start)
        return ts_fail(c, "meta_offset", meta_pos,
                       "meta_offset is not between the head and TsFileMetadata");
    /* Children precede their parent: a root's children lie in [meta_offset, metadata start]. */
    if (table_count > 0 && first_child < layout->meta_offset)
        return ts_fail(c, "index_node.offset", first_child_pos, "child offset before meta_offset");
    if (table_count > 0 && last_child > metadata_start)
        return ts_fail(c, "index_node.end_offset", last_child_pos,
                       "child offset inside or after TsFileMetadata");
    return ts_filter_and_properties(c, version, layout->filter, properties);
}

/* tsfile_scan_metadata(data, start, end, version, base) -> (tables, schema_start,
 * schema_count, meta_offset, filter_start, bits_start, byte_length, bit_count, k, filter_end,
 * properties). data[start:end] is TsFileMetadata, data[0] sits at file offset base; returned
 * positions index data. tables lists (table name, root node position); byte_length, bit_count
 * and k are 0 when the file has no filter. v3 has one table named "" and no schemas or
 * properties. */
PyObject *py_tsfile_scan_metadata(PyObject *self, PyObject *args) {
    Py_buffer view;
    Py_ssize_t start, end;
    int version;
    long long base;
    if (!PyArg_ParseTuple(args, "y*nniL", &view, &start, &end, &version, &base))
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
    int status = ts_scan(&c, version, tables, properties, &layout);
    if (status == -1)
        PyErr_Format(PyExc_ValueError, "TsFileMetadata field %s at offset %lld: %s", c.field,
                     base + (long long)c.error_pos, c.message);
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

/* tsfile_index_node(data, pos, key_kind, floor, limit, base) -> (keys, offsets, end_offset,
 * node_type, end_pos): one MetadataIndexNode at data[pos:], parsed with the rules of the Python
 * reader's _parse_node. key_kind 0: measurement level (keys are names), 1: v3 device level (keys
 * are 1-tuples), 2: v4 device level (keys are tuples of segments, None for a null segment).
 * Child offsets and the end offset must increase strictly within [floor, limit]. data[0] sits
 * at file offset base (for error offsets). */
PyObject *py_tsfile_index_node(PyObject *self, PyObject *args) {
    Py_buffer view;
    Py_ssize_t pos;
    int kind;
    long long floor_offset, limit, base;
    if (!PyArg_ParseTuple(args, "y*niLLL", &view, &pos, &kind, &floor_offset, &limit, &base))
        return NULL;
    PyObject *keys = NULL, *offsets = NULL, *result = NULL;
    if (pos < 0 || pos > view.len || kind < TSFILE_KEY_MEASUREMENT || kind > TSFILE_KEY_DEVICE_V4 ||
        base < 0 ||
        base > (long long)1 << 62) {
        PyErr_SetString(PyExc_ValueError, "bad arguments: need 0 <= pos <= len(data), "
                                          "key_kind 0..2, 0 <= base < 2**62");
        goto done;
    }
    ts_cursor c = {.data = (const u8 *)view.buf, .pos = pos, .end = view.len, .base = base};
    const char *key_field =
        kind != TSFILE_KEY_MEASUREMENT ? "index_node.device" : "index_node.measurement";
    long long count, previous = floor_offset, offset, node_type;
    Py_ssize_t start, length;
    if (ts_count(&c, "index_node.entry_count", 9, 0, &count))
        goto format_error;
    keys = PyTuple_New((Py_ssize_t)count);
    offsets = PyTuple_New((Py_ssize_t)count);
    if (!keys || !offsets)
        goto done;
    for (long long i = 0; i <= count; i++) {
        if (i < count) {
            PyObject *key;
            if (kind == TSFILE_KEY_DEVICE_V4) {
                Py_ssize_t key_pos = c.pos;
                long long segments;
                if (ts_count(&c, "index_node.segment_count", 1, 0, &segments))
                    goto format_error;
                if (segments == 0) {
                    ts_fail(&c, key_field, key_pos, "device ID has no segments");
                    goto format_error;
                }
                key = PyTuple_New((Py_ssize_t)segments);
                if (!key)
                    goto done;
                PyTuple_SET_ITEM(keys, (Py_ssize_t)i, key);
                for (long long s = 0; s < segments; s++) {
                    if (ts_varstr(&c, key_field, 1, &start, &length))
                        goto format_error;
                    PyObject *segment = ts_text(&c, start, length);
                    if (!segment)
                        goto done;
                    PyTuple_SET_ITEM(key, (Py_ssize_t)s, segment);
                }
            } else {
                if (ts_varstr(&c, key_field, 0, &start, &length))
                    goto format_error;
                PyObject *name = ts_text(&c, start, length);
                key = name && kind == TSFILE_KEY_DEVICE_V3 ? PyTuple_Pack(1, name) : name;
                if (kind == TSFILE_KEY_DEVICE_V3)
                    Py_XDECREF(name);
                if (!key)
                    goto done;
                PyTuple_SET_ITEM(keys, (Py_ssize_t)i, key);
            }
        }
        Py_ssize_t offset_pos = c.pos;
        if (ts_i64(&c, i < count ? "index_node.offset" : "index_node.end_offset", &offset))
            goto format_error;
        /* The first bound may equal floor; the following ones must increase strictly. */
        if (offset < previous || (i > 0 && offset == previous) || offset > limit) {
            ts_fail(&c, i < count ? "index_node.offset" : "index_node.end_offset", offset_pos,
                    "child offset is out of order or outside [floor, limit]");
            goto format_error;
        }
        previous = offset;
        if (i < count) {
            PyObject *number = PyLong_FromLongLong(offset);
            if (!number)
                goto done;
            PyTuple_SET_ITEM(offsets, (Py_ssize_t)i, number);
        }
    }
    Py_ssize_t type_pos = c.pos;
    if (ts_remaining(&c) < 1) {
        ts_fail(&c, "index_node.type", type_pos, "truncated node type");
        goto format_error;
    }
    node_type = c.data[c.pos++];
    if (kind != TSFILE_KEY_MEASUREMENT ? node_type > 1 : (node_type < 2 || node_type > 3)) {
        ts_fail(&c, "index_node.type", type_pos, "node type of the wrong level");
        goto format_error;
    }
    result = Py_BuildValue("(OOLLn)", keys, offsets, previous, node_type, c.pos);
    goto done;
format_error:
    PyErr_Format(PyExc_ValueError, "MetadataIndexNode field %s at offset %lld: %s", c.field,
                 base + (long long)c.error_pos, c.message);
done:
    Py_XDECREF(keys);
    Py_XDECREF(offsets);
    PyBuffer_Release(&view);
    return result;
}

/* tsfile_tail_verdict(tail, head, size, path, signed_tails) -> int: test a series path against
 * the Bloom filter of a file from its last bytes alone (find over thousands of files). tail is
 * the last len(tail) bytes of a file of `size` bytes, head its first 7 bytes (or more). The path
 * is hashed with each tail variant of signed_tails (a sequence of bools) by the same kernels as
 * bloomskip.bits. Returns 0 when the filter rules the path out under every variant, 1 when it
 * may hold it, and -1 when the caller must read the file itself: no filter, a metadata larger
 * than the tail, or anything malformed (the Python reader then names the problem). */
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
    if (ts_scan(&c, h[6], NULL, NULL, &layout) != 0 || layout.filter[2] == 0)
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
