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
 * batches_to_columns(buf, start, end, lo, hi[, check_crcs=True]) -> (n, next_pos, next_offset, columns)
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
 *   types (0 CreateTime, 1 LogAppendTime). With check_crcs every batch walked has its CRC-32C
 *   checked first (Kafka's consumer check.crcs): a mismatch raises CorruptRecordError(message,
 *   base_offset, position, stored, computed); a batch or record that does not parse raises
 *   MalformedRecordError(message, base_offset, position) (both ValueError; position: the byte in
 *   buf); a buffer whose bytes changed between the two passes raises BufferError.
 *
 * records_to_columns(buf, start, end, base_offset, base_timestamp, max_timestamp, log_append, lo, hi)
 *   -> (n, columns)
 *   The same for one batch's records section (an inflated compressed batch; its CRC is the caller's):
 *   MalformedRecordError when malformed.
 *
 * crc32c(buf[, software=False]) -> int
 *   CRC-32C (Castagnoli) of buf: the CPU's crc32 instruction where there is one (SSE4.2), else
 *   slicing-by-8 tables (software=True forces them: the tests compare both).
 *
 * With ODRADEK_SPEEDUPS_CORE defined the file is the decoding core alone (varints, the two record walks,
 * batches, CRC-32C), without Python: tests/fuzz/speedups_fuzzer.c includes it under libFuzzer and the
 * address and undefined-behaviour sanitizers.
 */
#ifdef ODRADEK_SPEEDUPS_CORE
/* the decoding core alone, without Python (tests/fuzz/speedups_fuzzer.c builds it under libFuzzer) */
#include <stddef.h>
typedef ptrdiff_t Py_ssize_t;
#else
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#endif
#include <stdint.h>
#include <string.h>

/* zig-zag varint of at most max_bytes bytes inside [*pos, lim); 0 on success. As Kafka's ByteUtils reads
 * them: a varint (5 bytes) keeps the low 32 bits of what it spells (readVarint's int drops the 5th byte's
 * high bits), a varlong (10 bytes) the low 64 (readVarlong's long), so a non-canonical encoding reads as
 * the value a Kafka broker or consumer reads, never as another one */
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
            if (max_bytes <= 5)
                raw &= 0xFFFFFFFFu;
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

/* count_records: the records of a section by their length fields alone (each > 0 and inside the section,
 * adding up to end - start exactly); -1 when they do not */
static long long
count_lengths(const uint8_t *p, Py_ssize_t start, Py_ssize_t end)
{
    Py_ssize_t pos = start;
    long long count = 0;
    while (pos < end) {
        uint64_t raw = 0;
        int shift = 0;
        for (;;) {
            if (pos >= end || shift > 28)
                return -1;
            uint8_t b = p[pos++];
            raw |= (uint64_t)(b & 0x7F) << shift;
            if (!(b & 0x80))
                break;
            shift += 7;
        }
        raw &= 0xFFFFFFFFu; /* readVarint's 32 bits (read_varint above) */
        int64_t length = (int64_t)(raw >> 1) ^ -(int64_t)(raw & 1);
        if (length <= 0 || length > end - pos)
            return -1;
        pos += (Py_ssize_t)length;
        count++;
    }
    return count;
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


/* ---------------------------------------------------------------- CRC-32C (Castagnoli) */

/* Kafka's record batch v2 checksum (bytes [21, end) of a batch: attributes to the last record).
 * SSE4.2's crc32 instruction where the CPU has it, three streams interleaved and joined with a
 * precomputed "append n zero bytes" operator; slicing-by-8 tables elsewhere. */

#define CRC_POLY 0x82F63B78u /* reflected Castagnoli polynomial */
#define CRC_LONG 8192
#define CRC_SHORT 256

static uint32_t crc_table[8][256];
static uint32_t crc_long_op[4][256], crc_short_op[4][256];
static int crc_hw;

/* the CRC register after n zero bytes, from state crc (no pre/post inversion) */
static uint32_t
crc_zeros_sw(uint32_t crc, size_t n)
{
    while (n--)
        crc = (crc >> 8) ^ crc_table[0][crc & 0xff];
    return crc;
}

static inline uint32_t
crc_apply_op(uint32_t op[4][256], uint32_t crc)
{
    return op[0][crc & 0xff] ^ op[1][(crc >> 8) & 0xff] ^ op[2][(crc >> 16) & 0xff] ^ op[3][crc >> 24];
}

static void
crc_init(void)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = c & 1 ? (c >> 1) ^ CRC_POLY : c >> 1;
        crc_table[0][i] = c;
    }
    for (int t = 1; t < 8; t++)
        for (int i = 0; i < 256; i++)
            crc_table[t][i] = (crc_table[t - 1][i] >> 8) ^ crc_table[0][crc_table[t - 1][i] & 0xff];
    /* the zero-append operators are linear: build them from the 32 single-bit states */
    uint32_t bit_long[32], bit_short[32];
    for (int b = 0; b < 32; b++) {
        bit_long[b] = crc_zeros_sw(1u << b, CRC_LONG);
        bit_short[b] = crc_zeros_sw(1u << b, CRC_SHORT);
    }
    for (int k = 0; k < 4; k++)
        for (uint32_t v = 0; v < 256; v++) {
            uint32_t l = 0, s = 0;
            for (int b = 0; b < 8; b++)
                if (v & (1u << b)) {
                    l ^= bit_long[8 * k + b];
                    s ^= bit_short[8 * k + b];
                }
            crc_long_op[k][v] = l;
            crc_short_op[k][v] = s;
        }
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    __builtin_cpu_init();
    crc_hw = __builtin_cpu_supports("sse4.2");
#endif
}

static uint32_t
crc32c_sw(uint32_t crc, const uint8_t *p, size_t n)
{
    crc = ~crc;
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        w ^= crc;
        crc = crc_table[7][w & 0xff] ^ crc_table[6][(w >> 8) & 0xff] ^ crc_table[5][(w >> 16) & 0xff]
            ^ crc_table[4][(w >> 24) & 0xff] ^ crc_table[3][(w >> 32) & 0xff] ^ crc_table[2][(w >> 40) & 0xff]
            ^ crc_table[1][(w >> 48) & 0xff] ^ crc_table[0][w >> 56];
        p += 8;
        n -= 8;
    }
#endif
    while (n--)
        crc = (crc >> 8) ^ crc_table[0][(crc ^ *p++) & 0xff];
    return ~crc;
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <nmmintrin.h>

__attribute__((target("sse4.2"))) static uint32_t
crc32c_hw(uint32_t crc32, const uint8_t *p, size_t n)
{
    uint64_t crc = (uint32_t)~crc32, w0, w1, w2;
    while (n && ((uintptr_t)p & 7)) {
        crc = _mm_crc32_u8((uint32_t)crc, *p++);
        n--;
    }
    /* three independent streams of CRC_LONG (then CRC_SHORT) bytes, joined: stream a's register moved
     * past stream b's bytes is a's register through the zero-append operator, xor b's */
    while (n >= 3 * CRC_LONG) {
        uint64_t c1 = 0, c2 = 0;
        for (size_t i = 0; i < CRC_LONG; i += 8) {
            memcpy(&w0, p + i, 8);
            memcpy(&w1, p + CRC_LONG + i, 8);
            memcpy(&w2, p + 2 * CRC_LONG + i, 8);
            crc = _mm_crc32_u64(crc, w0);
            c1 = _mm_crc32_u64(c1, w1);
            c2 = _mm_crc32_u64(c2, w2);
        }
        crc = crc_apply_op(crc_long_op, (uint32_t)crc) ^ (uint32_t)c1;
        crc = crc_apply_op(crc_long_op, (uint32_t)crc) ^ (uint32_t)c2;
        p += 3 * CRC_LONG;
        n -= 3 * CRC_LONG;
    }
    while (n >= 3 * CRC_SHORT) {
        uint64_t c1 = 0, c2 = 0;
        for (size_t i = 0; i < CRC_SHORT; i += 8) {
            memcpy(&w0, p + i, 8);
            memcpy(&w1, p + CRC_SHORT + i, 8);
            memcpy(&w2, p + 2 * CRC_SHORT + i, 8);
            crc = _mm_crc32_u64(crc, w0);
            c1 = _mm_crc32_u64(c1, w1);
            c2 = _mm_crc32_u64(c2, w2);
        }
        crc = crc_apply_op(crc_short_op, (uint32_t)crc) ^ (uint32_t)c1;
        crc = crc_apply_op(crc_short_op, (uint32_t)crc) ^ (uint32_t)c2;
        p += 3 * CRC_SHORT;
        n -= 3 * CRC_SHORT;
    }
    while (n >= 8) {
        memcpy(&w0, p, 8);
        crc = _mm_crc32_u64(crc, w0);
        p += 8;
        n -= 8;
    }
    while (n--)
        crc = _mm_crc32_u8((uint32_t)crc, *p++);
    return ~(uint32_t)crc;
}
#endif

static uint32_t
crc32c_buf(const uint8_t *p, size_t n)
{
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    if (crc_hw)
        return crc32c_hw(0, p, n);
#endif
    return crc32c_sw(0, p, n);
}


/* ---------------------------------------------------------------- records -> Arrow buffers */

/* Every read below lies inside [start, end), end checked against the buffer's length when the call
 * starts; every length and varint read from the data is checked against what is left before it is used.
 * The walk runs twice (count, then fill) with the GIL released, and another thread may write into the
 * buffer meanwhile (a bytearray cannot be resized while exported, but its bytes can change): the fill
 * pass writes only inside what the count pass allocated and must end exactly where it ended, else the
 * call fails (DECODE_CHANGED) instead of handing out partly written columns. */

enum { DECODE_OK = 0, DECODE_MALFORMED, DECODE_CRC, DECODE_CHANGED };

typedef struct {
    int kind;
    const char *why;
    Py_ssize_t pos;      /* byte position in the buffer of the batch (or record) */
    int64_t base_offset; /* the batch's base offset */
    uint32_t stored_crc, computed_crc;
} Err;

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
    uint64_t v = 0;
    for (int k = 0; k < 8; k++)
        v = (v << 8) | p[k];
    return (int64_t)v;
}

static inline int32_t
be32(const uint8_t *p)
{
    return (int32_t)(((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | (uint32_t)p[3]);
}

/* two's complement addition, as Java's long arithmetic (Kafka's consumer) does it: no undefined overflow */
static inline int64_t
wrap_add(int64_t a, int64_t b)
{
    return (int64_t)((uint64_t)a + (uint64_t)b);
}

static inline int
fail(Err *e, int kind, const char *why, Py_ssize_t pos, int64_t base_offset)
{
    e->kind = kind;
    e->why = why;
    e->pos = pos;
    e->base_offset = base_offset;
    return kind;
}

/* One records section; fill = 0 counts, fill = 1 writes. DECODE_OK or an error kind (e filled). */
static int
section(const uint8_t *p, Py_ssize_t pos, Py_ssize_t end, int64_t base_offset, int64_t base_ts, int64_t max_ts,
        int log_append, int64_t lo, int64_t hi, int fill, Cols *c, Err *e)
{
    Rec r;
    while (pos < end) {
        Py_ssize_t at = pos;
        if (read_record(p, &pos, end, -1, &r))
            return fail(e, DECODE_MALFORMED, "a record does not parse", at, base_offset);
        int64_t klen = r.klen, vlen = r.vlen;
        int64_t off = wrap_add(base_offset, r.delta);
        if (off < lo || off >= hi)
            continue;
        int64_t ms = log_append ? max_ts : wrap_add(base_ts, r.ts), us;
        if (__builtin_mul_overflow(ms, (int64_t)1000, &us))
            return fail(e, DECODE_MALFORMED, "a record's timestamp is out of range", at, base_offset);
        if (!fill) {
            c->n++;
            if (klen < 0) c->key_nulls++; else c->key_bytes += (Py_ssize_t)klen;
            if (vlen < 0) c->value_nulls++; else c->value_bytes += (Py_ssize_t)vlen;
            continue;
        }
        if (c->i >= c->n || (klen > 0 && klen > c->key_bytes - c->kpos) || (vlen > 0 && vlen > c->value_bytes - c->vpos)
            || (klen < 0 && !c->key_valid) || (vlen < 0 && !c->value_valid))
            return fail(e, DECODE_CHANGED, "the record set changed while it was decoded", at, base_offset);
        Py_ssize_t i = c->i++;
        if (klen >= 0) {
            if (c->key_valid) c->key_valid[i >> 3] |= (uint8_t)(1u << (i & 7));
            memcpy(c->key_data + c->kpos, p + r.kstart, (size_t)klen);
            c->kpos += (Py_ssize_t)klen;
        }
        c->key_off[i + 1] = (int32_t)c->kpos;
        if (vlen >= 0) {
            if (c->value_valid) c->value_valid[i >> 3] |= (uint8_t)(1u << (i & 7));
            memcpy(c->value_data + c->vpos, p + r.vstart, (size_t)vlen);
            c->vpos += (Py_ssize_t)vlen;
        }
        c->value_off[i + 1] = (int32_t)c->vpos;
        c->offsets[i] = off;
        c->ts[i] = us;
        c->ts_type[i] = log_append ? 1 : 0;
    }
    return DECODE_OK;
}

#define BATCH_HEADER 61
#define CRC_START 21

/* Walk the batches of buf[start, end): DECODE_OK (*stop = where it stopped) or an error kind (e filled).
 * With check_crcs each batch's CRC-32C is checked before anything of it is read (as Kafka's consumer does
 * with check.crcs, librdkafka's too), control batches and batches outside [lo, hi) included. */
static int
walk_batches(const uint8_t *p, Py_ssize_t start, Py_ssize_t end, int64_t lo, int64_t hi, int fill, int check_crcs,
             Cols *c, Err *e, Py_ssize_t *stop, int64_t *next_offset)
{
    Py_ssize_t pos = start;
    *next_offset = -1;
    while (end - pos >= BATCH_HEADER) {
        int64_t base_offset = be64(p + pos);
        int32_t length = be32(p + pos + 8);
        if (length < BATCH_HEADER - 12)
            return fail(e, DECODE_MALFORMED, "its batchLength is below the v2 header's size", pos, base_offset);
        if ((Py_ssize_t)length > end - pos - 12)
            break; /* incomplete */
        Py_ssize_t bend = pos + 12 + (Py_ssize_t)length;
        if (p[pos + 16] != 2)
            return fail(e, DECODE_MALFORMED, "its magic is not 2", pos, base_offset);
        int attributes = ((int)p[pos + 21] << 8) | p[pos + 22];
        if (attributes & 0x07)
            break; /* compressed: the caller inflates it (and checks its CRC) */
        if (check_crcs && !fill) {
            uint32_t stored = (uint32_t)be32(p + pos + 17);
            uint32_t computed = crc32c_buf(p + pos + CRC_START, (size_t)(bend - pos - CRC_START));
            if (stored != computed) {
                e->stored_crc = stored;
                e->computed_crc = computed;
                return fail(e, DECODE_CRC, "CRC-32C mismatch", pos, base_offset);
            }
        }
        int32_t last_delta = be32(p + pos + 23);
        if (!(attributes & 0x20) && wrap_add(base_offset, last_delta) >= lo && base_offset < hi) {
            int rc = section(p, pos + BATCH_HEADER, bend, base_offset, be64(p + pos + 27), be64(p + pos + 35),
                             (attributes & 0x08) != 0, lo, hi, fill, c, e);
            if (rc)
                return rc;
        }
        *next_offset = wrap_add(base_offset, wrap_add(last_delta, 1));
        pos = bend;
    }
    *stop = pos;
    return DECODE_OK;
}

/* The fill pass ended where the count pass did, every slot written */
static int
filled(const Cols *c)
{
    return c->i == c->n && c->kpos == c->key_bytes && c->vpos == c->value_bytes;
}

#ifndef ODRADEK_SPEEDUPS_CORE
/* ---------------------------------------------------------------- the Python module */

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
    long long count = count_lengths((const uint8_t *)view.buf, start, end);
    PyBuffer_Release(&view);
    return PyLong_FromLongLong(count);
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


static PyObject *
crc32c_py(PyObject *self, PyObject *args)
{
    Py_buffer view;
    int software = 0;
    if (!PyArg_ParseTuple(args, "y*|p", &view, &software))
        return NULL;
    uint32_t crc = software ? crc32c_sw(0, (const uint8_t *)view.buf, (size_t)view.len)
                            : crc32c_buf((const uint8_t *)view.buf, (size_t)view.len);
    PyBuffer_Release(&view);
    return PyLong_FromUnsignedLong(crc);
}


static PyObject *CorruptRecordError, *MalformedRecordError;

/* Raise the error of e; NULL */
static PyObject *
raise_decode_error(const Err *e)
{
    PyObject *args;
    if (e->kind == DECODE_CRC) {
        args = Py_BuildValue("(sLnkk)", "record batch is corrupt", (long long)e->base_offset, e->pos,
                             (unsigned long)e->stored_crc, (unsigned long)e->computed_crc);
        if (args) {
            PyErr_SetObject(CorruptRecordError, args);
            Py_DECREF(args);
        }
        return NULL;
    }
    if (e->kind == DECODE_CHANGED) {
        PyErr_Format(PyExc_BufferError, "%s (batch at offset %lld, byte %zd)", e->why, (long long)e->base_offset,
                     e->pos);
        return NULL;
    }
    args = Py_BuildValue("(sLn)", e->why, (long long)e->base_offset, e->pos);
    if (args) {
        PyErr_SetObject(MalformedRecordError, args);
        Py_DECREF(args);
    }
    return NULL;
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
    if (c->key_bytes > INT32_MAX || c->value_bytes > INT32_MAX || n > INT32_MAX - 1) {
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
    Py_ssize_t start, end, stop = 0, stop2 = 0;
    long long lo, hi;
    int check_crcs = 1;
    int64_t next_offset = -1, next_offset2 = -1;
    if (!PyArg_ParseTuple(args, "y*nnLL|p", &view, &start, &end, &lo, &hi, &check_crcs))
        return NULL;
    if (start < 0 || end > view.len || start > end) {
        PyBuffer_Release(&view);
        PyErr_Format(PyExc_ValueError, "range [%zd, %zd) is outside the buffer of %zd bytes", start, end, view.len);
        return NULL;
    }
    const uint8_t *p = (const uint8_t *)view.buf;
    Cols c;
    Err e;
    memset(&c, 0, sizeof c);
    memset(&e, 0, sizeof e);
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = walk_batches(p, start, end, lo, hi, 0, check_crcs, &c, &e, &stop, &next_offset);
    Py_END_ALLOW_THREADS
    if (rc) {
        PyBuffer_Release(&view);
        return raise_decode_error(&e);
    }
    PyObject *objs[NCOLS];
    if (allocate(&c, objs)) {
        drop(objs);
        PyBuffer_Release(&view);
        return NULL;
    }
    Py_BEGIN_ALLOW_THREADS
    rc = walk_batches(p, start, end, lo, hi, 1, check_crcs, &c, &e, &stop2, &next_offset2);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&view);
    if (!rc && (!filled(&c) || stop2 != stop || next_offset2 != next_offset))
        rc = fail(&e, DECODE_CHANGED, "the record set changed while it was decoded", stop2, next_offset2);
    if (rc) {
        drop(objs);
        return raise_decode_error(&e);
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
        PyErr_Format(PyExc_ValueError, "range [%zd, %zd) is outside the buffer of %zd bytes", start, end, view.len);
        return NULL;
    }
    const uint8_t *p = (const uint8_t *)view.buf;
    Cols c;
    Err e;
    memset(&c, 0, sizeof c);
    memset(&e, 0, sizeof e);
    /* the GIL is held throughout: no other thread writes into the buffer between the passes */
    if (section(p, start, end, base_offset, base_ts, max_ts, log_append, lo, hi, 0, &c, &e)) {
        PyBuffer_Release(&view);
        return raise_decode_error(&e);
    }
    PyObject *objs[NCOLS];
    if (allocate(&c, objs)) {
        drop(objs);
        PyBuffer_Release(&view);
        return NULL;
    }
    int rc = section(p, start, end, base_offset, base_ts, max_ts, log_append, lo, hi, 1, &c, &e);
    PyBuffer_Release(&view);
    if (!rc && !filled(&c))
        rc = fail(&e, DECODE_CHANGED, "the record set changed while it was decoded", end, base_offset);
    if (rc) {
        drop(objs);
        return raise_decode_error(&e);
    }
    PyObject *cols = columns_tuple(objs);
    if (!cols)
        return NULL;
    return Py_BuildValue("(nN)", c.n, cols);
}

static PyMethodDef methods[] = {
    {"batches_to_columns", batches_to_columns, METH_VARARGS,
     "Records of uncompressed v2 batches as Arrow column buffers: (n, next_pos, next_offset, columns)."},
    {"records_to_columns", records_to_columns, METH_VARARGS,
     "Records of one (inflated) records section as Arrow column buffers: (n, columns)."},
    {"crc32c", crc32c_py, METH_VARARGS, "CRC-32C (Castagnoli) of a buffer; software=True skips the CPU's instruction."},
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
    crc_init();
    PyObject *m = PyModule_Create(&module);
    if (!m)
        return NULL;
    /* args: (message, base_offset, position, stored_crc, computed_crc) */
    CorruptRecordError = PyErr_NewExceptionWithDoc(
        "odradek._speedups.CorruptRecordError",
        "A record batch's CRC-32C does not match its bytes: args (message, base_offset, position, stored, computed).",
        PyExc_ValueError, NULL);
    /* args: (message, base_offset, position) */
    MalformedRecordError = PyErr_NewExceptionWithDoc(
        "odradek._speedups.MalformedRecordError",
        "A record batch or record does not parse: args (message, base_offset, position).", PyExc_ValueError, NULL);
    if (!CorruptRecordError || !MalformedRecordError
        || PyModule_AddObjectRef(m, "CorruptRecordError", CorruptRecordError) < 0
        || PyModule_AddObjectRef(m, "MalformedRecordError", MalformedRecordError) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
#endif /* ODRADEK_SPEEDUPS_CORE */
