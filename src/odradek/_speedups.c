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
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

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

#define SCAN_MALFORMED (-1)
#define SCAN_OFFSET_DELTA (-2)

static long long
scan(const uint8_t *p, Py_ssize_t start, Py_ssize_t end, int check_offsets,
     long long *count_out, int64_t *lo_out, int64_t *hi_out, long long *keyless_out)
{
    Py_ssize_t pos = start;
    long long count = 0, keyless = -1;
    int64_t lo = 0, hi = 0, v;
    while (pos < end) {
        int64_t len;
        if (read_varint(p, &pos, end, 5, &len) || len <= 0 || len > end - pos)
            return SCAN_MALFORMED;
        Py_ssize_t rec_end = pos + (Py_ssize_t)len;
        pos++; /* attributes */
        int64_t ts;
        if (read_varint(p, &pos, rec_end, 10, &ts))
            return SCAN_MALFORMED;
        if (read_varint(p, &pos, rec_end, 5, &v))
            return SCAN_MALFORMED;
        if (check_offsets && v != count)
            return SCAN_OFFSET_DELTA;
        /* key */
        if (read_varint(p, &pos, rec_end, 5, &v) || v < -1 || v > rec_end - pos)
            return SCAN_MALFORMED;
        if (v < 0) {
            if (keyless < 0)
                keyless = count;
        } else {
            pos += (Py_ssize_t)v;
        }
        /* value */
        if (read_varint(p, &pos, rec_end, 5, &v) || v < -1 || v > rec_end - pos)
            return SCAN_MALFORMED;
        if (v > 0)
            pos += (Py_ssize_t)v;
        int64_t headers;
        if (read_varint(p, &pos, rec_end, 5, &headers) || headers < 0)
            return SCAN_MALFORMED;
        for (int64_t h = 0; h < headers; h++) {
            if (read_varint(p, &pos, rec_end, 5, &v) || v < 0 || v > rec_end - pos)
                return SCAN_MALFORMED;
            pos += (Py_ssize_t)v;
            if (read_varint(p, &pos, rec_end, 5, &v) || v < -1 || v > rec_end - pos)
                return SCAN_MALFORMED;
            if (v > 0)
                pos += (Py_ssize_t)v;
        }
        if (pos != rec_end)
            return SCAN_MALFORMED;
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

static PyMethodDef methods[] = {
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
