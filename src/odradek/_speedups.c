/*
 * Optional C speed-ups for the produce path (odradek.protocol.records falls back to
 * pure Python when this module is not built).
 *
 * count_records(buf, start, end) -> int
 *   Walks an uncompressed v2 records section: each record starts with its zig-zag
 *   varint length. Returns the number of records when the lengths add up exactly to
 *   end - start, else -1 (a malformed section).
 *
 * scan_records(buf, start, end[, check_offsets=1]) -> (count, min_ts_delta, max_ts_delta, first_null_key) | int
 *   Walks an uncompressed v2 records section field by field, as Kafka's DefaultRecord.readFrom
 *   reads it: length varint, attributes int8, timestampDelta varlong, offsetDelta varint,
 *   key (varint length, -1 null), value (varint length, -1 null), header count varint, headers
 *   (key varint length >= 0, value varint length >= -1). Every field must lie inside its record
 *   and the fields must add up to the record's length. Returns the number of records, the
 *   smallest and largest timestampDelta, and the index of the first record with a null key
 *   (-1: none); or -1 (malformed) or -2 (record i's offsetDelta is not i; checked only with
 *   check_offsets: a compacted batch keeps its records' original deltas). Same contract as
 *   records._scan_uncompressed.
 *
 * uninitialized_bytearray(n) -> bytearray
 *   A bytearray of n bytes whose contents are not zeroed (bytearray(n) zero-fills: a memset of
 *   every large request's buffer right before the socket overwrites it).
 *
 * batches_to_columns(buf, start, end, lo, hi) -> (n, next_pos, next_offset, columns) | int
 *   The records of the uncompressed v2 batches at buf[start:end) with lo <= offset < hi, as the
 *   buffers of Arrow columns in Spark's Kafka-source layout, built without a Python object per
 *   record (the pipeline source, odradek.pipeline.arrow_records). Control batches are skipped.
 *   The walk stops at the first compressed batch, or at one that is incomplete (a fetch response
 *   may end inside a batch); next_pos is where it stopped (== end when everything was read),
 *   next_offset the offset after the last batch walked (-1: none).
 *   columns = (key_validity, key_offsets, key_data, value_validity, value_offsets, value_data,
 *   offsets, timestamps, timestamp_types): validity bitmaps (LSB first; None when no value is
 *   null), int32 offsets (n + 1), data bytes, int64 offsets, int64 timestamps in microseconds
 *   (CreateTime: baseTimestamp + timestampDelta; LogAppendTime: maxTimestamp), int32 timestamp
 *   types (0 CreateTime, 1 LogAppendTime). Returns -1 when a batch or record is malformed.
 *
 * records_to_columns(buf, start, end, base_offset, base_timestamp, max_timestamp, log_append, lo, hi)
 *   -> (n, columns) | int
 *   The same for one batch's records section (an inflated compressed batch): -1 when malformed.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

static PyObject *
count_records(PyObject *self, PyObject *args)
{
    Py_buffer view;
    Py_ssize_t start, end;
    if (!PyArg_ParseTuple(args, "y*nn", &view, &start, &end))
        return NULL;
    if (start < 0 || end > view.len || start > end) {
        PyBuffer_Release(&view);
        return PyLong_FromLong(-1);
    }
    const uint8_t *p = (const uint8_t *)view.buf;
    Py_ssize_t pos = start;
    long long count = 0;
    int bad = 0;
    while (pos < end) {
        uint64_t raw = 0;
        int shift = 0;
        for (;;) {
            if (pos >= end || shift > 28) { bad = 1; break; }
            uint8_t b = p[pos++];
            raw |= (uint64_t)(b & 0x7F) << shift;
            if (!(b & 0x80)) break;
            shift += 7;
        }
        if (bad) break;
        int64_t length = (int64_t)(raw >> 1) ^ -(int64_t)(raw & 1);
        if (length <= 0 || length > end - pos) { bad = 1; break; }
        pos += (Py_ssize_t)length;
        count++;
    }
    PyBuffer_Release(&view);
    if (bad || pos != end)
        return PyLong_FromLong(-1);
    return PyLong_FromLongLong(count);
}


/* zig-zag varint of at most max_bytes bytes inside [*pos, lim); 0 on success */
static inline int
read_varint(const uint8_t *p, Py_ssize_t *pos, Py_ssize_t lim, int max_bytes, int64_t *out)
{
    Py_ssize_t i = *pos;
    if (i < lim && p[i] < 0x80) { /* the common one-byte case */
        uint8_t b = p[i];
        *out = (int64_t)(b >> 1) ^ -(int64_t)(b & 1);
        *pos = i + 1;
        return 0;
    }
    uint64_t raw = 0;
    int shift = 0;
    for (int n = 0; n < max_bytes; n++) {
        if (i >= lim)
            return -1;
        uint8_t b = p[i++];
        raw |= (uint64_t)(b & 0x7F) << shift;
        if (!(b & 0x80)) {
            *out = (int64_t)(raw >> 1) ^ -(int64_t)(raw & 1);
            *pos = i;
            return 0;
        }
        shift += 7;
    }
    return -1;
}

/* One record's framing inside [*pos, end): length, attributes, timestamp and offset deltas, key,
 * value and headers, every field inside the record and the record's length used exactly. On
 * success (0) *pos is the record's end and r holds what the callers read; -1 when malformed, -2
 * when expect_delta >= 0 and the offset delta differs from it (checked as soon as it is read, so
 * a record both out of sequence and malformed further on is reported out of sequence). */
typedef struct {
    int64_t ts, delta, klen, vlen;
    Py_ssize_t kstart, vstart;
} Rec;

static inline int
read_record(const uint8_t *p, Py_ssize_t *pos_io, Py_ssize_t end, int64_t expect_delta, Rec *r)
{
    Py_ssize_t pos = *pos_io;
    int64_t len, headers, v;
    if (read_varint(p, &pos, end, 5, &len) || len <= 0 || len > end - pos)
        return -1;
    Py_ssize_t rec_end = pos + (Py_ssize_t)len;
    pos++; /* attributes */
    if (read_varint(p, &pos, rec_end, 10, &r->ts) || read_varint(p, &pos, rec_end, 5, &r->delta))
        return -1;
    if (expect_delta >= 0 && r->delta != expect_delta)
        return -2;
    if (read_varint(p, &pos, rec_end, 5, &r->klen) || r->klen < -1 || r->klen > rec_end - pos)
        return -1;
    r->kstart = pos;
    if (r->klen > 0)
        pos += (Py_ssize_t)r->klen;
    if (read_varint(p, &pos, rec_end, 5, &r->vlen) || r->vlen < -1 || r->vlen > rec_end - pos)
        return -1;
    r->vstart = pos;
    if (r->vlen > 0)
        pos += (Py_ssize_t)r->vlen;
    if (read_varint(p, &pos, rec_end, 5, &headers) || headers < 0)
        return -1;
    for (int64_t h = 0; h < headers; h++) {
        if (read_varint(p, &pos, rec_end, 5, &v) || v < 0 || v > rec_end - pos)
            return -1;
        pos += (Py_ssize_t)v;
        if (read_varint(p, &pos, rec_end, 5, &v) || v < -1 || v > rec_end - pos)
            return -1;
        if (v > 0)
            pos += (Py_ssize_t)v;
    }
    if (pos != rec_end)
        return -1;
    *pos_io = pos;
    return 0;
}

#define SCAN_MALFORMED (-1)
#define SCAN_OFFSET_DELTA (-2)

static long long
scan(const uint8_t *p, Py_ssize_t start, Py_ssize_t end, int check_offsets,
     long long *count_out, int64_t *lo_out, int64_t *hi_out, long long *keyless_out)
{
    Py_ssize_t pos = start;
    long long count = 0, keyless = -1;
    int64_t lo = 0, hi = 0;
    Rec r;
    while (pos < end) {
        int rc = read_record(p, &pos, end, check_offsets ? (int64_t)count : -1, &r);
        if (rc)
            return rc == -2 ? SCAN_OFFSET_DELTA : SCAN_MALFORMED;
        if (r.klen < 0 && keyless < 0)
            keyless = count;
        int64_t ts = r.ts;
        if (count == 0) {
            lo = hi = ts;
        } else if (ts < lo) {
            lo = ts;
        } else if (ts > hi) {
            hi = ts;
        }
        count++;
    }
    *count_out = count;
    *lo_out = lo;
    *hi_out = hi;
    *keyless_out = keyless;
    return 0;
}

static PyObject *
scan_records(PyObject *self, PyObject *args)
{
    Py_buffer view;
    Py_ssize_t start, end;
    int check_offsets = 1;
    if (!PyArg_ParseTuple(args, "y*nn|p", &view, &start, &end, &check_offsets))
        return NULL;
    if (start < 0 || end > view.len || start > end) {
        PyBuffer_Release(&view);
        return PyLong_FromLong(SCAN_MALFORMED);
    }
    long long count = 0, keyless = -1;
    int64_t lo = 0, hi = 0;
    long long rc;
    if (end - start >= (1 << 20)) { /* large (inflated) sections: let the other threads run */
        Py_BEGIN_ALLOW_THREADS
        rc = scan((const uint8_t *)view.buf, start, end, check_offsets, &count, &lo, &hi, &keyless);
        Py_END_ALLOW_THREADS
    } else {
        rc = scan((const uint8_t *)view.buf, start, end, check_offsets, &count, &lo, &hi, &keyless);
    }
    PyBuffer_Release(&view);
    if (rc)
        return PyLong_FromLongLong(rc);
    return Py_BuildValue("(LLLL)", count, (long long)lo, (long long)hi, keyless);
}

static PyObject *
uninitialized_bytearray(PyObject *self, PyObject *arg)
{
    Py_ssize_t n = PyLong_AsSsize_t(arg);
    if (n == -1 && PyErr_Occurred())
        return NULL;
    if (n < 0) {
        PyErr_SetString(PyExc_ValueError, "negative size");
        return NULL;
    }
    return PyByteArray_FromStringAndSize(NULL, n);
}


/* ---------------------------------------------------------------- records -> Arrow buffers */

typedef struct {
    /* pass 1 totals */
    Py_ssize_t n, key_bytes, value_bytes, key_nulls, value_nulls;
    /* pass 2 outputs (NULL in pass 1) */
    uint8_t *key_valid, *value_valid, *key_data, *value_data;
    int32_t *key_off, *value_off, *ts_type;
    int64_t *offsets, *ts;
    Py_ssize_t i, kpos, vpos;
} Cols;

static inline int64_t
be64(const uint8_t *p)
{
    return ((int64_t)p[0] << 56) | ((int64_t)p[1] << 48) | ((int64_t)p[2] << 40) | ((int64_t)p[3] << 32)
         | ((int64_t)p[4] << 24) | ((int64_t)p[5] << 16) | ((int64_t)p[6] << 8) | (int64_t)p[7];
}

static inline int32_t
be32(const uint8_t *p)
{
    return (int32_t)(((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | (uint32_t)p[3]);
}

/* One records section; fill = 0 counts, fill = 1 writes. 0 on success, -1 malformed. */
static int
section(const uint8_t *p, Py_ssize_t pos, Py_ssize_t end, int64_t base_offset, int64_t base_ts, int64_t max_ts,
        int log_append, int64_t lo, int64_t hi, int fill, Cols *c)
{
    Rec r;
    while (pos < end) {
        if (read_record(p, &pos, end, -1, &r))
            return -1;
        int64_t ts = r.ts, delta = r.delta, klen = r.klen, vlen = r.vlen;
        Py_ssize_t kstart = r.kstart, vstart = r.vstart;
        int64_t off = base_offset + delta;
        if (off < lo || off >= hi)
            continue;
        if (!fill) {
            c->n++;
            if (klen < 0) c->key_nulls++; else c->key_bytes += (Py_ssize_t)klen;
            if (vlen < 0) c->value_nulls++; else c->value_bytes += (Py_ssize_t)vlen;
            continue;
        }
        Py_ssize_t i = c->i++;
        if (klen >= 0) {
            if (c->key_valid) c->key_valid[i >> 3] |= (uint8_t)(1u << (i & 7));
            memcpy(c->key_data + c->kpos, p + kstart, (size_t)klen);
            c->kpos += (Py_ssize_t)klen;
        }
        c->key_off[i + 1] = (int32_t)c->kpos;
        if (vlen >= 0) {
            if (c->value_valid) c->value_valid[i >> 3] |= (uint8_t)(1u << (i & 7));
            memcpy(c->value_data + c->vpos, p + vstart, (size_t)vlen);
            c->vpos += (Py_ssize_t)vlen;
        }
        c->value_off[i + 1] = (int32_t)c->vpos;
        c->offsets[i] = off;
        c->ts[i] = (log_append ? max_ts : base_ts + ts) * 1000;
        c->ts_type[i] = log_append ? 1 : 0;
    }
    return 0;
}

#define BATCH_HEADER 61

/* Walk the batches of buf[start, end): 0 on success (*stop = where it stopped), -1 malformed. */
static int
walk_batches(const uint8_t *p, Py_ssize_t start, Py_ssize_t end, int64_t lo, int64_t hi, int fill, Cols *c,
             Py_ssize_t *stop, int64_t *next_offset)
{
    Py_ssize_t pos = start;
    *next_offset = -1;
    while (end - pos >= BATCH_HEADER) {
        int32_t length = be32(p + pos + 8);
        if (length < BATCH_HEADER - 12)
            return -1;
        if ((Py_ssize_t)length > end - pos - 12)
            break; /* incomplete */
        Py_ssize_t bend = pos + 12 + (Py_ssize_t)length;
        if (p[pos + 16] != 2)
            return -1;
        int attributes = ((int)p[pos + 21] << 8) | p[pos + 22];
        if (attributes & 0x07)
            break; /* compressed: the caller inflates it */
        int64_t base_offset = be64(p + pos);
        int32_t last_delta = be32(p + pos + 23);
        if (!(attributes & 0x20) && base_offset + last_delta >= lo && base_offset < hi) {
            if (section(p, pos + BATCH_HEADER, bend, base_offset, be64(p + pos + 27), be64(p + pos + 35),
                        (attributes & 0x08) != 0, lo, hi, fill, c))
                return -1;
        }
        *next_offset = base_offset + last_delta + 1;
        pos = bend;
    }
    *stop = pos;
    return 0;
}

static uint8_t *
alloc_bytes(PyObject **obj, Py_ssize_t n, int zero)
{
    *obj = PyBytes_FromStringAndSize(NULL, n);
    if (!*obj)
        return NULL;
    uint8_t *b = (uint8_t *)PyBytes_AS_STRING(*obj);
    if (zero)
        memset(b, 0, (size_t)n);
    return b;
}

enum { K_VALID, K_OFF, K_DATA, V_VALID, V_OFF, V_DATA, OFFS, TS, TS_TYPE, NCOLS };

/* Allocate the columns of c (pass-1 totals), or return -1 with an exception set. */
static int
allocate(Cols *c, PyObject **objs)
{
    Py_ssize_t n = c->n, bitmap = (n + 7) / 8;
    for (int k = 0; k < NCOLS; k++)
        objs[k] = NULL;
    if (c->key_bytes > INT32_MAX || c->value_bytes > INT32_MAX) {
        PyErr_SetString(PyExc_OverflowError, "more than 2 GiB of keys or values in one call");
        return -1;
    }
    c->key_valid = c->value_valid = NULL;
    if (c->key_nulls) {
        if (!(c->key_valid = alloc_bytes(&objs[K_VALID], bitmap, 1))) return -1;
    } else {
        Py_INCREF(Py_None);
        objs[K_VALID] = Py_None;
    }
    if (c->value_nulls) {
        if (!(c->value_valid = alloc_bytes(&objs[V_VALID], bitmap, 1))) return -1;
    } else {
        Py_INCREF(Py_None);
        objs[V_VALID] = Py_None;
    }
    if (!(c->key_off = (int32_t *)alloc_bytes(&objs[K_OFF], 4 * (n + 1), 0))) return -1;
    if (!(c->value_off = (int32_t *)alloc_bytes(&objs[V_OFF], 4 * (n + 1), 0))) return -1;
    if (!(c->key_data = alloc_bytes(&objs[K_DATA], c->key_bytes, 0))) return -1;
    if (!(c->value_data = alloc_bytes(&objs[V_DATA], c->value_bytes, 0))) return -1;
    if (!(c->offsets = (int64_t *)alloc_bytes(&objs[OFFS], 8 * n, 0))) return -1;
    if (!(c->ts = (int64_t *)alloc_bytes(&objs[TS], 8 * n, 0))) return -1;
    if (!(c->ts_type = (int32_t *)alloc_bytes(&objs[TS_TYPE], 4 * n, 0))) return -1;
    c->key_off[0] = c->value_off[0] = 0;
    c->i = c->kpos = c->vpos = 0;
    return 0;
}

static PyObject *
columns_tuple(PyObject **objs)
{
    PyObject *t = PyTuple_New(NCOLS);
    if (!t) {
        for (int k = 0; k < NCOLS; k++)
            Py_XDECREF(objs[k]);
        return NULL;
    }
    for (int k = 0; k < NCOLS; k++)
        PyTuple_SET_ITEM(t, k, objs[k]);
    return t;
}

static void
drop(PyObject **objs)
{
    for (int k = 0; k < NCOLS; k++)
        Py_XDECREF(objs[k]);
}

static PyObject *
batches_to_columns(PyObject *self, PyObject *args)
{
    Py_buffer view;
    Py_ssize_t start, end, stop = 0;
    long long lo, hi;
    int64_t next_offset = -1;
    if (!PyArg_ParseTuple(args, "y*nnLL", &view, &start, &end, &lo, &hi))
        return NULL;
    if (start < 0 || end > view.len || start > end) {
        PyBuffer_Release(&view);
        return PyLong_FromLong(-1);
    }
    const uint8_t *p = (const uint8_t *)view.buf;
    Cols c;
    memset(&c, 0, sizeof c);
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = walk_batches(p, start, end, lo, hi, 0, &c, &stop, &next_offset);
    Py_END_ALLOW_THREADS
    if (rc) {
        PyBuffer_Release(&view);
        return PyLong_FromLong(-1);
    }
    PyObject *objs[NCOLS];
    if (allocate(&c, objs)) {
        drop(objs);
        PyBuffer_Release(&view);
        return NULL;
    }
    Py_BEGIN_ALLOW_THREADS
    rc = walk_batches(p, start, end, lo, hi, 1, &c, &stop, &next_offset);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&view);
    if (rc) {
        drop(objs);
        return PyLong_FromLong(-1);
    }
    PyObject *cols = columns_tuple(objs);
    if (!cols)
        return NULL;
    return Py_BuildValue("(nnLN)", c.n, stop, (long long)next_offset, cols);
}

static PyObject *
records_to_columns(PyObject *self, PyObject *args)
{
    Py_buffer view;
    Py_ssize_t start, end;
    long long base_offset, base_ts, max_ts, lo, hi;
    int log_append;
    if (!PyArg_ParseTuple(args, "y*nnLLLpLL", &view, &start, &end, &base_offset, &base_ts, &max_ts, &log_append,
                          &lo, &hi))
        return NULL;
    if (start < 0 || end > view.len || start > end) {
        PyBuffer_Release(&view);
        return PyLong_FromLong(-1);
    }
    const uint8_t *p = (const uint8_t *)view.buf;
    Cols c;
    memset(&c, 0, sizeof c);
    if (section(p, start, end, base_offset, base_ts, max_ts, log_append, lo, hi, 0, &c)) {
        PyBuffer_Release(&view);
        return PyLong_FromLong(-1);
    }
    PyObject *objs[NCOLS];
    if (allocate(&c, objs)) {
        drop(objs);
        PyBuffer_Release(&view);
        return NULL;
    }
    section(p, start, end, base_offset, base_ts, max_ts, log_append, lo, hi, 1, &c);
    PyBuffer_Release(&view);
    PyObject *cols = columns_tuple(objs);
    if (!cols)
        return NULL;
    return Py_BuildValue("(nN)", c.n, cols);
}

static PyMethodDef methods[] = {
    {"batches_to_columns", batches_to_columns, METH_VARARGS,
     "Records of uncompressed v2 batches as Arrow column buffers: (n, next_pos, next_offset, columns) or -1."},
    {"records_to_columns", records_to_columns, METH_VARARGS,
     "Records of one (inflated) records section as Arrow column buffers: (n, columns) or -1."},
    {"uninitialized_bytearray", uninitialized_bytearray, METH_O, "A bytearray of n bytes, contents not zeroed."},
    {"scan_records", scan_records, METH_VARARGS,
     "Walk an uncompressed v2 records section field by field: (count, min/max timestampDelta, first null key) or -1/-2."},
    {"count_records", count_records, METH_VARARGS, "Count the records of an uncompressed v2 records section, -1 if malformed."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "odradek._speedups", NULL, -1, methods};

PyMODINIT_FUNC
PyInit__speedups(void)
{
    return PyModule_Create(&module);
}
