package dev.odradek.peer;

import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.BufferedReader;
import java.io.FileOutputStream;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Random;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * The Java client of Kafka 4.4 as clients of {@code odradek verify run} (odradek.verify.runner): an idempotent
 * producer (acks=all) sending one record at a time and a read_committed consumer that assigns every partition
 * from offset 0, each writing its operations to one history file in the shape of odradek.verify.history (one JSON
 * object a line: index, time, process, type, f, value). Times are {@link System#nanoTime()}, CLOCK_MONOTONIC on
 * Linux like Python's {@code time.monotonic_ns()}, so the runner merges this file with the Python clients' by time.
 *
 * <p>Usage: {@code VerifyWorkload BOOTSTRAP TOPIC PARTITIONS HISTORY PROCESS_BASE VALUE_BASE SEED OP_TIMEOUT_MS}.
 * The producer is process PROCESS_BASE, the consumer PROCESS_BASE + 1; a client replaced after an error takes its
 * number plus 2 (as the Python workload does). Values are VALUE_BASE + 1, + 2, ... per key, so they never meet the
 * Python workload's (1, 2, 3, ...). The clients run until stdin is closed; then the producer stops and the
 * consumer reads on until it has read nothing new for five seconds, and the program exits. A process killed
 * before that leaves its open operations without a completion, which the history reads as {@code info}.
 */
public final class VerifyWorkload {
    private static final ObjectMapper JSON = new ObjectMapper();
    private static final int CLIENTS = 2;
    private static final long DRAIN_IDLE_NS = TimeUnit.SECONDS.toNanos(5);

    private final String bootstrap;
    private final String topic;
    private final int partitions;
    private final long valueBase;
    private final long opTimeoutMs;
    private final Random random;
    private final OutputStream out;
    private final Map<String, Long> next = new HashMap<>();
    private long index = 0;
    private volatile boolean stop = false;
    private volatile boolean failed = false;

    private VerifyWorkload(String bootstrap, String topic, int partitions, OutputStream out, long valueBase,
                           long seed, long opTimeoutMs) {
        this.bootstrap = bootstrap;
        this.topic = topic;
        this.partitions = partitions;
        this.out = out;
        this.valueBase = valueBase;
        this.random = new Random(seed);
        this.opTimeoutMs = opTimeoutMs;
    }

    public static void main(String[] args) throws Exception {
        if (args.length != 8) {
            System.err.println("usage: VerifyWorkload BOOTSTRAP TOPIC PARTITIONS HISTORY PROCESS_BASE VALUE_BASE SEED "
                    + "OP_TIMEOUT_MS");
            System.exit(2);
        }
        long base = Long.parseLong(args[4]);
        try (OutputStream out = new FileOutputStream(args[3])) {
            VerifyWorkload w = new VerifyWorkload(args[0], args[1], Integer.parseInt(args[2]), out,
                    Long.parseLong(args[5]), Long.parseLong(args[6]), Long.parseLong(args[7]));
            Thread producer = new Thread(() -> w.producer(base), "verify-java-producer");
            Thread consumer = new Thread(() -> w.consumer(base + 1), "verify-java-consumer");
            // a client bug must not pass silently: the exit code says so
            Thread.UncaughtExceptionHandler failed = (t, e) -> {
                System.err.println(t.getName() + " failed:");
                e.printStackTrace();
                w.failed = true;
            };
            producer.setUncaughtExceptionHandler(failed);
            consumer.setUncaughtExceptionHandler(failed);
            producer.start();
            consumer.start();
            // the runner closes stdin to stop the clients
            BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
            while (in.readLine() != null) {
                // nothing is read but the end
            }
            w.stop = true;
            producer.join();
            consumer.join();
            System.exit(w.failed ? 1 : 0);
        }
    }

    private String key(int partition) {
        return topic + "-" + partition;
    }

    private synchronized long take(String key) {
        long v = next.getOrDefault(key, valueBase + 1);
        next.put(key, v + 1);
        return v;
    }

    /** One history line; the time is read under the lock, so the file's times never go back. */
    private synchronized void record(long process, String type, String f, Object value) {
        Map<String, Object> line = new LinkedHashMap<>();
        line.put("index", index++);
        line.put("time", System.nanoTime());
        line.put("process", process);
        line.put("type", type);
        line.put("f", f);
        line.put("value", value);
        try {
            out.write((JSON.writeValueAsString(line) + "\n").getBytes(StandardCharsets.UTF_8));
            out.flush();
        } catch (IOException e) {
            throw new RuntimeException(e);
        }
    }

    private static List<Object> mop(Object... items) {
        List<Object> l = new ArrayList<>();
        for (Object o : items) {
            l.add(o);
        }
        return l;
    }

    private KafkaProducer<String, String> newProducer() {
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ProducerConfig.ACKS_CONFIG, "all");
        p.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, true);
        p.put(ProducerConfig.LINGER_MS_CONFIG, 0);
        p.put(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, (int) (opTimeoutMs / 2));
        p.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, (int) opTimeoutMs);
        p.put(ProducerConfig.RETRY_BACKOFF_MS_CONFIG, 100);
        p.put(ProducerConfig.RECONNECT_BACKOFF_MAX_MS_CONFIG, 1000);
        p.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, opTimeoutMs);
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        return new KafkaProducer<>(p);
    }

    private void producer(long process) {
        KafkaProducer<String, String> p = newProducer();
        while (!stop) {
            int part = random.nextInt(partitions);
            String key = key(part);
            long value = take(key);
            record(process, "invoke", "send", List.of(mop("send", key, value)));
            try {
                Future<RecordMetadata> f = p.send(new ProducerRecord<>(topic, part, null, Long.toString(value)));
                RecordMetadata md = f.get(opTimeoutMs + 5000, TimeUnit.MILLISECONDS);
                record(process, "ok", "send", List.of(mop("send", key, mop(md.offset(), value))));
                continue;
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                record(process, "info", "send", List.of(mop("send", key, value)));
                break;
            } catch (ExecutionException | TimeoutException | RuntimeException e) {
                // a timeout or a broker error: the record may or may not be in the log
                record(process, "info", "send", List.of(mop("send", key, value)));
                System.err.println("producer " + process + ": send of " + key + "=" + value + " unknown (" + e
                        + "); replacing the client");
            }
            process += CLIENTS;
            try {
                p.close(Duration.ofSeconds(1));
            } catch (RuntimeException closing) {
                System.err.println("producer " + process + ": close failed (" + closing + ")");
            }
            p = newProducer();
        }
        p.close(Duration.ofSeconds(5));
    }

    private KafkaConsumer<String, String> newConsumer(long process) {
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, false);
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        p.put(ConsumerConfig.FETCH_MAX_WAIT_MS_CONFIG, 100);
        p.put(ConsumerConfig.RECONNECT_BACKOFF_MAX_MS_CONFIG, 1000);
        p.put(ConsumerConfig.REQUEST_TIMEOUT_MS_CONFIG, (int) opTimeoutMs);
        p.put(ConsumerConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, (int) opTimeoutMs);
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        KafkaConsumer<String, String> c = new KafkaConsumer<>(p);
        List<String> keys = new ArrayList<>();
        List<TopicPartition> tps = new ArrayList<>();
        for (int i = 0; i < partitions; i++) {
            keys.add(key(i));
            tps.add(new TopicPartition(topic, i));
        }
        record(process, "invoke", "assign", keys);
        c.assign(tps);
        for (TopicPartition tp : tps) {
            c.seek(tp, 0);
        }
        record(process, "ok", "assign", keys);
        return c;
    }

    private void consumer(long process) {
        KafkaConsumer<String, String> c = newConsumer(process);
        long idleSince = -1;
        while (true) {
            // once stopped, drain: read until nothing new for a few seconds, so that lost writes show
            if (stop && idleSince >= 0 && System.nanoTime() - idleSince > DRAIN_IDLE_NS) {
                break;
            }
            record(process, "invoke", "poll", List.of(mop("poll")));
            ConsumerRecords<String, String> recs;
            try {
                recs = c.poll(Duration.ofMillis(500));
            } catch (RuntimeException e) {
                record(process, "info", "poll", List.of(mop("poll")));
                System.err.println("consumer " + process + ": poll failed (" + e + "); replacing the client");
                try {
                    c.close(Duration.ofSeconds(1));
                } catch (RuntimeException closing) {
                    System.err.println("consumer " + process + ": close failed (" + closing + ")");
                }
                process += CLIENTS;
                c = newConsumer(process);
                continue;
            }
            Map<String, List<Object>> got = new LinkedHashMap<>();
            for (ConsumerRecord<String, String> r : recs) {
                got.computeIfAbsent(key(r.partition()), k -> new ArrayList<>())
                        .add(mop(r.offset(), Long.parseLong(r.value())));
            }
            record(process, "ok", "poll", List.of(mop("poll", got)));
            if (!got.isEmpty()) {
                idleSince = -1;
            } else if (idleSince < 0) {
                idleSince = System.nanoTime();
            }
        }
        c.close(Duration.ofSeconds(5));
    }
}
