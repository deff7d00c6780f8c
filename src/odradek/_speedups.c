/*
 * Optional C speed-ups for the produce path (odradek.protocol.records falls back to
 * pure Python when this module is not built).
 *
 * count_records(buf, start, end) -> int
 *   Walks an uncompressed v2 records section: each record starts with its zig-zag
 *   varint length. Returns the number of records when the lengths add up exactly to
 *   end - start, else -1 (a malformed section).
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
    {"count_records", count_records, METH_VARARGS, "Count the records of an uncompressed v2 records section, -1 if malformed."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "odradek._speedups", NULL, -1, methods};

PyMODINIT_FUNC
PyInit__speedups(void)
{
    return PyModule_Create(&module);
}
