/*
 * lat_producer: a rate-paced librdkafka producer for latency benchmarks (bench/latency_bench.py).
 *
 * Produces RATE messages/s in ticks: every TICK µs (1,000 by default) it sleeps with
 * clock_nanosleep(TIMER_ABSTIME) to the tick's absolute time, produces the messages due by then
 * (RATE x elapsed - sent, so a late tick catches up rather than lowering the rate), then serves
 * delivery reports with rd_kafka_poll(rk, 0). It never spins: between ticks the thread sleeps.
 *
 * Each payload is SIZE bytes and starts with "LATENCY:<wall clock µs>" (gettimeofday at the
 * produce call), the convention librdkafka's rdkafka_performance -C -l reads back to write each
 * record's end-to-end latency. Before the timed messages, -W sends one "WARMUP" message to each of
 * the PARTITIONS partitions and waits for it, so connections to every leader are up; a consumer
 * counting messages must expect PARTITIONS more (they carry no LATENCY: prefix, so they add no
 * latency sample).
 *
 * At the end it prints one JSON line on stdout:
 *   {"records": N, "delivered": N, "failed": 0, "elapsed_s": 10.0, "records_per_sec": 1000.0,
 *    "mb_per_sec": 0.98, "behind_max_ms": 0.1, "queue_full": 0, "cpu_s": 0.12,
 *    "ack_ms": {"p50": .., "p99": .., "p999": .., "max": .., "avg": ..}}
 * records_per_sec is the rate of produce calls from the first tick to the last call;
 * behind_max_ms is how late the latest tick ran against its schedule (a generator that keeps up
 * stays below a tick or two); queue_full counts 1 ms waits for room in a full local queue; ack_ms is
 * each message's produce call to its delivery report.
 *
 *   lat_producer -b HOST:PORT -t TOPIC -r RATE -c COUNT [-s SIZE] [-a ACKS] [-T TICK_US]
 *                [-W PARTITIONS] [-A LATENCY_FILE] [-X key=value ...]
 *
 * Built by bench/build_rdkafka.sh against the static librdkafka it builds.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "rdkafka.h"

static uint32_t *ack_us;       /* ack latency per delivered message, µs */
static int64_t delivered;      /* delivery reports with success */
static int64_t failed;         /* delivery reports with an error */
static int64_t warmup_pending; /* warm-up messages not yet reported */

static uint64_t mono_ns(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static uint64_t wall_us(void) {
        struct timeval tv;
        gettimeofday(&tv, NULL);
        return (uint64_t)tv.tv_sec * 1000000ULL + (uint64_t)tv.tv_usec;
}

/* msg_opaque: 0 for a warm-up message, else the produce call's CLOCK_MONOTONIC ns */
static void on_delivery(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque) {
        uint64_t sent_ns = (uint64_t)(uintptr_t)m->_private;
        (void)rk;
        (void)opaque;
        if (sent_ns == 0) {
                warmup_pending--;
                if (m->err)
                        fprintf(stderr, "warm-up message failed: %s\n", rd_kafka_err2str(m->err));
                return;
        }
        if (m->err) {
                if (failed++ < 5)
                        fprintf(stderr, "delivery failed: %s\n", rd_kafka_err2str(m->err));
                return;
        }
        uint64_t d = (mono_ns() - sent_ns) / 1000;
        ack_us[delivered++] = d > UINT32_MAX ? UINT32_MAX : (uint32_t)d;
}

static int cmp_u32(const void *a, const void *b) {
        uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
        return x < y ? -1 : x > y;
}

static double quantile_ms(const uint32_t *v, int64_t n, double q) {
        if (n == 0)
                return 0.0;
        int64_t i = (int64_t)(q * (double)n);
        if (i >= n)
                i = n - 1;
        return v[i] / 1000.0;
}

static void usage(const char *me) {
        fprintf(stderr,
                "usage: %s -b BOOTSTRAP -t TOPIC -r RATE -c COUNT [-s SIZE] [-a ACKS] [-T TICK_US]\n"
                "          [-W PARTITIONS] [-A LATENCY_FILE] [-X key=value ...]\n",
                me);
        exit(2);
}

static void set(rd_kafka_conf_t *conf, const char *k, const char *v) {
        char err[512];
        if (rd_kafka_conf_set(conf, k, v, err, sizeof(err)) != RD_KAFKA_CONF_OK) {
                fprintf(stderr, "%s=%s: %s\n", k, v, err);
                exit(2);
        }
}

/* produce one message, waiting on a full local queue; 0 on success */
static int produce(rd_kafka_topic_t *rkt, int32_t partition, char *buf, size_t len, uint64_t *queue_full,
                   void *opaque) {
        rd_kafka_t *rk = NULL;
        for (;;) {
                if (rd_kafka_produce(rkt, partition, RD_KAFKA_MSG_F_COPY, buf, len, NULL, 0, opaque) == 0)
                        return 0;
                rd_kafka_resp_err_t err = rd_kafka_last_error();
                if (err != RD_KAFKA_RESP_ERR__QUEUE_FULL) {
                        fprintf(stderr, "produce: %s\n", rd_kafka_err2str(err));
                        return -1;
                }
                (*queue_full)++;
                if (!rk)
                        rk = rd_kafka_topic_opaque(rkt);
                rd_kafka_poll(rk, 1);
        }
}

int main(int argc, char **argv) {
        const char *bootstrap = NULL, *topic = NULL, *lat_path = NULL;
        long rate = 0, size = 1024, tick_us = 1000, warm_parts = 0;
        int64_t count = 0;
        const char *acks = "all";
        char err[512];
        int opt;

        rd_kafka_conf_t *conf = rd_kafka_conf_new();
        set(conf, "linger.ms", "1");
        while ((opt = getopt(argc, argv, "b:t:r:c:s:a:T:W:A:X:")) != -1) {
                switch (opt) {
                case 'b': bootstrap = optarg; break;
                case 't': topic = optarg; break;
                case 'r': rate = atol(optarg); break;
                case 'c': count = atoll(optarg); break;
                case 's': size = atol(optarg); break;
                case 'a': acks = optarg; break;
                case 'T': tick_us = atol(optarg); break;
                case 'W': warm_parts = atol(optarg); break;
                case 'A': lat_path = optarg; break;
                case 'X': {
                        char *eq = strchr(optarg, '=');
                        if (!eq)
                                usage(argv[0]);
                        *eq = '\0';
                        set(conf, optarg, eq + 1);
                        break;
                }
                default: usage(argv[0]);
                }
        }
        if (!bootstrap || !topic || rate <= 0 || count <= 0 || size < 32 || tick_us <= 0)
                usage(argv[0]);
        set(conf, "bootstrap.servers", bootstrap);
        set(conf, "acks", acks);
        rd_kafka_conf_set_dr_msg_cb(conf, on_delivery);

        ack_us = calloc((size_t)count, sizeof(*ack_us));
        char *buf = malloc((size_t)size);
        if (!ack_us || !buf) {
                fprintf(stderr, "out of memory\n");
                return 1;
        }
        memset(buf, 'x', (size_t)size);

        rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof(err));
        if (!rk) {
                fprintf(stderr, "rd_kafka_new: %s\n", err);
                return 1;
        }
        rd_kafka_topic_conf_t *tconf = rd_kafka_topic_conf_new();
        rd_kafka_topic_conf_set_opaque(tconf, rk);
        rd_kafka_topic_t *rkt = rd_kafka_topic_new(rk, topic, tconf);
        uint64_t queue_full = 0;

        /* warm-up: one message to each partition, waited for, so every leader's connection is up */
        if (warm_parts > 0) {
                memcpy(buf, "WARMUP", 6);
                for (int32_t p = 0; p < warm_parts; p++) {
                        warmup_pending++;
                        if (produce(rkt, p, buf, (size_t)size, &queue_full, NULL) != 0)
                                return 1;
                }
                uint64_t give_up = mono_ns() + 30ULL * 1000000000ULL;
                while (warmup_pending > 0 && mono_ns() < give_up)
                        rd_kafka_poll(rk, 10);
                if (warmup_pending > 0) {
                        fprintf(stderr, "warm-up not acknowledged within 30 s\n");
                        return 1;
                }
        }

        struct rusage ru0;
        getrusage(RUSAGE_SELF, &ru0);
        uint64_t t0 = mono_ns(), last_call = t0, behind_max = 0;
        const uint64_t tick_ns = (uint64_t)tick_us * 1000ULL;
        int64_t sent = 0;
        for (uint64_t k = 0; sent < count; k++) {
                uint64_t due_at = t0 + k * tick_ns;
                struct timespec ts = {.tv_sec = (time_t)(due_at / 1000000000ULL),
                                      .tv_nsec = (long)(due_at % 1000000000ULL)};
                while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
                        ;
                uint64_t now = mono_ns();
                if (now - due_at > behind_max)
                        behind_max = now - due_at;
                /* messages due by now: RATE x elapsed, whole ticks only */
                int64_t due = (int64_t)(((double)(now - t0) / 1e9) * (double)rate) + 1;
                if (due > count)
                        due = count;
                for (; sent < due; sent++) {
                        uint64_t call_ns = mono_ns();
                        int n = snprintf(buf, (size_t)size, "LATENCY:%" PRIu64, wall_us());
                        buf[n] = ' '; /* the terminator would end the consumer's sscanf there anyway */
                        if (produce(rkt, RD_KAFKA_PARTITION_UA, buf, (size_t)size, &queue_full,
                                    (void *)(uintptr_t)call_ns) != 0)
                                return 1;
                        last_call = mono_ns();
                }
                rd_kafka_poll(rk, 0);
        }
        double produce_s = (double)(last_call - t0) / 1e9;
        rd_kafka_flush(rk, 60000);
        struct rusage ru1;
        getrusage(RUSAGE_SELF, &ru1);
        double cpu = (double)(ru1.ru_utime.tv_sec - ru0.ru_utime.tv_sec + ru1.ru_stime.tv_sec - ru0.ru_stime.tv_sec) +
                     (double)(ru1.ru_utime.tv_usec - ru0.ru_utime.tv_usec + ru1.ru_stime.tv_usec -
                              ru0.ru_stime.tv_usec) / 1e6;
        int64_t in_queue = rd_kafka_outq_len(rk);

        if (lat_path) {
                FILE *f = fopen(lat_path, "w");
                if (f) {
                        for (int64_t i = 0; i < delivered; i++)
                                fprintf(f, "%" PRIu32 "\n", ack_us[i]);
                        fclose(f);
                }
        }
        double sum = 0;
        for (int64_t i = 0; i < delivered; i++)
                sum += ack_us[i];
        qsort(ack_us, (size_t)delivered, sizeof(*ack_us), cmp_u32);
        double per_s = produce_s > 0 ? (double)sent / produce_s : 0.0;
        printf("{\"records\": %" PRId64 ", \"delivered\": %" PRId64 ", \"failed\": %" PRId64
               ", \"in_queue\": %" PRId64 ", \"elapsed_s\": %.3f, \"records_per_sec\": %.1f, \"mb_per_sec\": %.3f"
               ", \"behind_max_ms\": %.3f, \"queue_full\": %" PRIu64 ", \"cpu_s\": %.3f, \"ack_ms\": {\"p50\": %.3f"
               ", \"p99\": %.3f, \"p999\": %.3f, \"max\": %.3f, \"avg\": %.3f}}\n",
               sent, delivered, failed, in_queue, produce_s, per_s, per_s * (double)size / 1048576.0,
               (double)behind_max / 1e6, queue_full, cpu, quantile_ms(ack_us, delivered, 0.5),
               quantile_ms(ack_us, delivered, 0.99), quantile_ms(ack_us, delivered, 0.999),
               delivered ? ack_us[delivered - 1] / 1000.0 : 0.0, delivered ? sum / (double)delivered / 1000.0 : 0.0);
        fflush(stdout);
        rd_kafka_topic_destroy(rkt);
        rd_kafka_destroy(rk);
        return (failed || delivered < sent) ? 1 : 0;
}
