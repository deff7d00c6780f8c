package dev.odradek.peer;

import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Arrays;
import java.util.Locale;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicBoolean;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.Topology;
import org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.state.Stores;

/**
 * Kafka Streams' classic word count, the Streams judge of a broker (tests/judges/test_streams.py).
 *
 * <pre>
 * java -cp CLASSPATH dev.odradek.peer.WordCount BOOTSTRAP APPLICATION_ID INPUT OUTPUT STATE_DIR [key=value ...]
 * </pre>
 *
 * <p>Lines of text (String values) on INPUT are split into lower-case words (flatMapValues), re-keyed by word
 * (groupBy: the repartition topic APPLICATION_ID-words-repartition) and counted in a persistent RocksDB store
 * {@code word-counts} (changelog APPLICATION_ID-word-counts-changelog); each new count goes to OUTPUT as
 * word (String) → count (Long, 8 bytes big-endian). Processing is exactly_once_v2, committing every 100 ms,
 * internal topics with replication factor 1; the trailing key=value arguments are more StreamsConfig settings
 * (they win over these).
 *
 * <p>Stdout, one line each, flushed: {@code RUNNING} each time the instance reaches RUNNING, {@code ERROR
 * <exception>} when a stream thread dies (the client is then shut down), {@code CLOSED clean|timeout}. SIGTERM
 * closes the instance (up to 60 s) and exits 0 when the close was clean and no error happened, 1 otherwise; an
 * instance that stops by itself (ERROR state) exits 1. kill -9 is the unclean stop the judge also uses.
 */
public final class WordCount {
    public static final String STORE = "word-counts";
    public static final String REPARTITION = "words";

    private WordCount() {}

    public static Topology topology(String input, String output) {
        StreamsBuilder builder = new StreamsBuilder();
        builder.stream(input, Consumed.with(Serdes.String(), Serdes.String()))
                .flatMapValues(line -> Arrays.asList(line.toLowerCase(Locale.ROOT).split("\\W+")))
                .filter((key, word) -> !word.isEmpty())
                .groupBy((key, word) -> word, Grouped.with(REPARTITION, Serdes.String(), Serdes.String()))
                .count(Materialized.<String, Long>as(Stores.persistentKeyValueStore(STORE))
                        .withKeySerde(Serdes.String())
                        .withValueSerde(Serdes.Long()))
                .toStream()
                .to(output, Produced.with(Serdes.String(), Serdes.Long()));
        return builder.build();
    }

    public static Properties config(String bootstrap, String applicationId, String stateDir) {
        Properties props = new Properties();
        props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(StreamsConfig.APPLICATION_ID_CONFIG, applicationId);
        props.put(StreamsConfig.STATE_DIR_CONFIG, stateDir);
        props.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, StreamsConfig.EXACTLY_ONCE_V2);
        props.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, "100");
        props.put(StreamsConfig.REPLICATION_FACTOR_CONFIG, "1");
        props.put(StreamsConfig.DEFAULT_KEY_SERDE_CLASS_CONFIG, Serdes.StringSerde.class.getName());
        props.put(StreamsConfig.DEFAULT_VALUE_SERDE_CLASS_CONFIG, Serdes.StringSerde.class.getName());
        return props;
    }

    public static void main(String[] args) throws InterruptedException {
        if (args.length < 5) {
            System.err.println("usage: WordCount BOOTSTRAP APPLICATION_ID INPUT OUTPUT STATE_DIR [key=value ...]");
            System.exit(2);
        }
        Properties props = config(args[0], args[1], args[4]);
        for (int i = 5; i < args.length; i++) {
            int eq = args[i].indexOf('=');
            if (eq <= 0) {
                System.err.println("WordCount: " + args[i] + " is not key=value");
                System.exit(2);
            }
            props.put(args[i].substring(0, eq), args[i].substring(eq + 1));
        }
        PrintStream out = new PrintStream(System.out, true, StandardCharsets.UTF_8);
        KafkaStreams streams = new KafkaStreams(topology(args[2], args[3]), props);
        AtomicBoolean failed = new AtomicBoolean(false);
        CountDownLatch stopped = new CountDownLatch(1);
        streams.setStateListener((newState, oldState) -> {
            if (newState == KafkaStreams.State.RUNNING) {
                out.println("RUNNING");
            } else if (newState == KafkaStreams.State.ERROR) {
                failed.set(true);
                stopped.countDown();
            }
        });
        streams.setUncaughtExceptionHandler(e -> {
            failed.set(true);
            out.println("ERROR " + e);
            return StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse.SHUTDOWN_CLIENT;
        });
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            boolean clean = streams.close(Duration.ofSeconds(60));
            out.println("CLOSED " + (clean ? "clean" : "timeout"));
            // the exit code says how the close went (the JVM's own would be 143 after SIGTERM)
            Runtime.getRuntime().halt(clean && !failed.get() ? 0 : 1);
        }, "word-count-close"));
        streams.start();
        stopped.await();
        System.exit(1);
    }
}
