/*
 * libFuzzer harness for the decoding core of src/odradek/_speedups.c (built without Python): the record
 * walks of count_records and scan_records, the two passes of batches_to_columns and records_to_columns,
 * and the CRC-32C, run under AddressSanitizer and UndefinedBehaviorSanitizer by
 * tests/fuzz/test_sanitizers.py:
 *
 *   clang -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
 *       tests/fuzz/speedups_fuzzer.c -o speedups_fuzzer
 *   ./speedups_fuzzer -max_total_time=60 tests/fuzz/corpus/speedups
 *
 * Input: 6 control bytes, then the bytes decoded.
 *   byte 0: bit 0 check CRCs; bit 1 give every batch a correct CRC first (so that mutations reach what
 *           lies behind the check); bit 2 change the buffer between the count and the fill pass (what
 *           another thread may do while the GIL is released); bit 3 decode it as one records section
 *           (records_to_columns: an inflated batch) instead of batches; bit 4 LogAppendTime; bit 5 the
 *           produce path's scan checks offset deltas
 *   byte 1, 2: lo and hi offsets of the range kept (byte - 8: small, around the seeds' offsets; 255: no bound)
 *   bytes 3-5: with bit 2, the byte at position (byte 3 << 8 | byte 4) % length is xored with byte 5
 *           between the passes
 *
 * count_records' walk (lengths alone) must count every section the field-by-field scan accepts alike.
 * Columns are allocated at exactly the sizes the count pass asks for (ASan reports a byte past any of
 * them). Without a change between the passes the fill pass must succeed and fill every slot; with one it
 * may fail, but never write outside. The hardware and software CRC-32C must agree.
 */
#define ODRADEK_SPEEDUPS_CORE 1
#include "../../src/odradek/_speedups.c"

#include <stdio.h>
#include <stdlib.h>

int
LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    crc_init();
    return 0;
}

static void
fix_crcs(uint8_t *b, Py_ssize_t n)
{
    Py_ssize_t pos = 0;
    while (n - pos >= BATCH_HEADER) {
        int32_t length = be32(b + pos + 8);
        if (length < BATCH_HEADER - 12 || (Py_ssize_t)length > n - pos - 12)
            return;
        Py_ssize_t end = pos + 12 + length;
        uint32_t crc = crc32c_buf(b + pos + CRC_START, (size_t)(end - pos - CRC_START));
        b[pos + 17] = (uint8_t)(crc >> 24);
        b[pos + 18] = (uint8_t)(crc >> 16);
        b[pos + 19] = (uint8_t)(crc >> 8);
        b[pos + 20] = (uint8_t)crc;
        pos = end;
    }
}

static int64_t
bound(uint8_t v, int64_t none)
{
    return v == 255 ? none : (int64_t)v - 8;
}

#define CHECK(cond)                                                                   \
    do {                                                                              \
        if (!(cond)) {                                                                \
            fprintf(stderr, "speedups_fuzzer: check failed: %s (line %d)\n", #cond, __LINE__); \
            abort();                                                                  \
        }                                                                             \
    } while (0)

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 6)
        return 0;
    uint8_t flags = data[0];
    int64_t lo = bound(data[1], INT64_MIN), hi = bound(data[2], INT64_MAX);
    Py_ssize_t n = (Py_ssize_t)(size - 6);
    uint8_t *buf = (uint8_t *)malloc((size_t)n); /* exactly n bytes: a read past the end is reported */
    if (n)
        memcpy(buf, data + 6, (size_t)n);
    if (flags & 2)
        fix_crcs(buf, n);
    if (n)
        CHECK(crc32c_buf(buf, (size_t)n) == crc32c_sw(0, buf, (size_t)n));

    long long count, keyless;
    int64_t tlo, thi;
    long long counted = count_lengths(buf, 0, n);
    CHECK(counted >= -1 && counted <= n);
    if (scan(buf, 0, n, (flags & 32) != 0, &count, &tlo, &thi, &keyless) == 0)
        CHECK(counted == count); /* a section the field-by-field walk accepts has the lengths count_records counts */

    Cols c;
    Err e;
    memset(&c, 0, sizeof c);
    memset(&e, 0, sizeof e);
    Py_ssize_t stop = 0, stop2 = 0;
    int64_t next = -1, next2 = -1;
    int sectionwise = (flags & 8) != 0, log_append = (flags & 16) != 0, check = flags & 1;
    int rc = sectionwise ? section(buf, 0, n, 1000, 1700000000000LL, 1700000000500LL, log_append, lo, hi, 0, &c, &e)
                         : walk_batches(buf, 0, n, lo, hi, 0, check, &c, &e, &stop, &next);
    if (rc == DECODE_OK) {
        CHECK(c.n >= 0 && c.key_bytes >= 0 && c.value_bytes >= 0 && c.key_bytes <= n && c.value_bytes <= n);
        size_t bitmap = (size_t)(c.n + 7) / 8;
        c.key_valid = c.key_nulls ? (uint8_t *)calloc(bitmap, 1) : NULL;
        c.value_valid = c.value_nulls ? (uint8_t *)calloc(bitmap, 1) : NULL;
        c.key_off = (int32_t *)malloc(4 * (size_t)(c.n + 1));
        c.value_off = (int32_t *)malloc(4 * (size_t)(c.n + 1));
        c.key_data = (uint8_t *)malloc((size_t)c.key_bytes);
        c.value_data = (uint8_t *)malloc((size_t)c.value_bytes);
        c.offsets = (int64_t *)malloc(8 * (size_t)c.n);
        c.ts = (int64_t *)malloc(8 * (size_t)c.n);
        c.ts_type = (int32_t *)malloc(4 * (size_t)c.n);
        c.key_off[0] = c.value_off[0] = 0;
        int changed = (flags & 4) && n && data[5];
        if (changed) /* another thread writes into the buffer between the passes */
            buf[(((Py_ssize_t)data[3] << 8) | data[4]) % n] ^= data[5];
        int rc2 = sectionwise
                      ? section(buf, 0, n, 1000, 1700000000000LL, 1700000000500LL, log_append, lo, hi, 1, &c, &e)
                      : walk_batches(buf, 0, n, lo, hi, 1, check, &c, &e, &stop2, &next2);
        if (!changed) {
            CHECK(rc2 == DECODE_OK && filled(&c));
            CHECK(sectionwise || (stop2 == stop && next2 == next));
            for (Py_ssize_t i = 0; i < c.n; i++)
                CHECK(c.key_off[i] <= c.key_off[i + 1] && c.value_off[i] <= c.value_off[i + 1]
                      && c.offsets[i] >= lo && c.offsets[i] < hi);
        } else {
            CHECK(c.i <= c.n && c.kpos <= c.key_bytes && c.vpos <= c.value_bytes);
        }
        free(c.key_valid);
        free(c.value_valid);
        free(c.key_off);
        free(c.value_off);
        free(c.key_data);
        free(c.value_data);
        free(c.offsets);
        free(c.ts);
        free(c.ts_type);
    } else {
        CHECK(e.pos >= 0 && e.pos <= n);
    }
    free(buf);
    return 0;
}
