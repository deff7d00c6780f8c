package dev.odradek.peer;

import com.fasterxml.jackson.databind.ObjectMapper;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.Collections;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.admin.AbortTransactionSpec;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.DescribeClusterResult;
import org.apache.kafka.clients.admin.DescribeProducersResult;
import org.apache.kafka.clients.admin.FeatureUpdate;
import org.apache.kafka.clients.admin.GroupListing;
import org.apache.kafka.clients.admin.ListOffsetsResult;
import org.apache.kafka.clients.admin.LogDirDescription;
import org.apache.kafka.clients.admin.NewPartitionReassignment;
import org.apache.kafka.clients.admin.NewPartitions;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.RecordsToDelete;
import org.apache.kafka.clients.admin.ScramCredentialInfo;
import org.apache.kafka.clients.admin.ScramMechanism;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.admin.TransactionDescription;
import org.apache.kafka.clients.admin.TransactionListing;
import org.apache.kafka.clients.admin.UpdateFeaturesOptions;
import org.apache.kafka.clients.admin.UserScramCredentialUpsertion;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.ElectionType;
import org.apache.kafka.common.IsolationLevel;
import org.apache.kafka.common.TopicCollection;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionReplica;
import org.apache.kafka.common.Uuid;
import org.apache.kafka.common.acl.AccessControlEntry;
import org.apache.kafka.common.acl.AccessControlEntryFilter;
import org.apache.kafka.common.acl.AclBinding;
import org.apache.kafka.common.acl.AclBindingFilter;
import org.apache.kafka.common.acl.AclOperation;
import org.apache.kafka.common.acl.AclPermissionType;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.quota.ClientQuotaAlteration;
import org.apache.kafka.common.quota.ClientQuotaEntity;
import org.apache.kafka.common.quota.ClientQuotaFilter;
import org.apache.kafka.common.resource.PatternType;
import org.apache.kafka.common.resource.ResourcePattern;
import org.apache.kafka.common.resource.ResourcePatternFilter;
import org.apache.kafka.common.resource.ResourceType;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * The Java client of Kafka 4.4 (kafka-clients, the reference client) as a judge: every Admin call of Kafka 4.4's
 * interface and the producer and consumer paths, run in order against one broker, one JSON line per check on
 * stdout: {"check": name, "ok": bool, "error": "ExceptionClass: message" or null, "detail": {...}}.
 *
 * <p>Usage: {@code ClientJudge BOOTSTRAP PREFIX}, or {@code ClientJudge --authz BOOTSTRAP PREFIX ADMIN:PASSWORD
 * USER:PASSWORD} for the authorization mode ({@link AuthzJudge}). The broker is expected to have an authorizer with the client as a
 * super user (ACL checks) or none (then the ACL checks report SecurityDisabledException). A check that fails does
 * not stop the ones after it; the caller compares the lines with what it expects of the broker.
 */
public final class ClientJudge {
    private static final ObjectMapper JSON = new ObjectMapper();
    private static final long TIMEOUT_S = 30;

    @FunctionalInterface
    interface Check {
        Object run() throws Exception;
    }

    private final String bootstrap;
    private final String prefix;
    private final Admin admin;
    private final String topic;
    private final String txnTopic;
    private final Map<String, Object> state = new HashMap<>();

    private ClientJudge(String bootstrap, String prefix) {
        this.bootstrap = bootstrap;
        this.prefix = prefix;
        Properties p = new Properties();
        p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, 20000);
        p.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, 15000);
        this.admin = Admin.create(p);
        this.topic = prefix + "-topic";
        this.txnTopic = prefix + "-txn";
    }

    public static void main(String[] args) throws Exception {
        if (args.length == 5 && args[0].equals("--authz")) {
            // the authorization mode (AuthzJudge): a principal without, then with, the ACL each call needs
            AuthzJudge authz = new AuthzJudge(args[1], args[2], args[3], args[4]);
            try {
                authz.run();
            } finally {
                authz.close();
            }
            System.exit(0);
        }
        if (args.length != 2) {
            System.err.println("usage: ClientJudge BOOTSTRAP PREFIX | --authz BOOTSTRAP PREFIX ADMIN:PW USER:PW");
            System.exit(2);
        }
        ClientJudge judge = new ClientJudge(args[0], args[1]);
        try {
            judge.runAll();
        } finally {
            judge.admin.close(Duration.ofSeconds(10));
        }
        System.exit(0);
    }

    private static <T> T get(org.apache.kafka.common.KafkaFuture<T> f) throws Exception {
        return f.get(TIMEOUT_S, TimeUnit.SECONDS);
    }

    private void check(String name, Check c) {
        Map<String, Object> line = new LinkedHashMap<>();
        line.put("check", name);
        try {
            Object detail = c.run();
            line.put("ok", true);
            line.put("error", null);
            line.put("detail", detail);
        } catch (Throwable t) {
            Throwable cause = t;
            while ((cause instanceof ExecutionException || cause.getClass() == RuntimeException.class)
                    && cause.getCause() != null) {
                cause = cause.getCause();
            }
            line.put("ok", false);
            line.put("error", cause.getClass().getSimpleName() + ": " + cause.getMessage());
            line.put("detail", null);
        }
        try {
            System.out.println(JSON.writeValueAsString(line));
        } catch (Exception e) {
            System.out.println("{\"check\": \"" + name + "\", \"ok\": false, \"error\": \"unprintable\"}");
        }
        System.out.flush();
    }

    private static void require(boolean condition, String what) {
        if (!condition) {
            throw new IllegalStateException("expected " + what);
        }
    }

    private Properties producerProps() {
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.LINGER_MS_CONFIG, 5);
        return p;
    }

    private Properties consumerProps(String group) {
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, false);
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        if (group != null) {
            p.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        }
        return p;
    }

    private static List<ConsumerRecord<String, String>> drain(KafkaConsumer<String, String> c, int want) {
        List<ConsumerRecord<String, String>> out = new ArrayList<>();
        // a group's first join waits for __consumer_offsets and group.initial.rebalance.delay.ms: on a loaded
        // machine Kafka itself once gave a subscribed consumer nothing within 30 s
        long deadline = System.currentTimeMillis() + 60000;
        while (out.size() < want && System.currentTimeMillis() < deadline) {
            for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(200))) {
                out.add(r);
            }
        }
        return out;
    }

    private List<ConsumerRecord<String, String>> readAll(String t, int partitions, int want, String isolation) {
        Properties p = consumerProps(null);
        p.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, isolation);
        try (KafkaConsumer<String, String> c = new KafkaConsumer<>(p)) {
            List<TopicPartition> tps = new ArrayList<>();
            for (int i = 0; i < partitions; i++) {
                tps.add(new TopicPartition(t, i));
            }
            c.assign(tps);
            c.seekToBeginning(tps);
            List<ConsumerRecord<String, String>> got = drain(c, want);
            // anything beyond what is expected shows up in a last short poll
            for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(500))) {
                got.add(r);
            }
            return got;
        }
    }

    private Map<String, Object> consumeInGroup(String protocol) throws Exception {
        String group = prefix + "-" + protocol;
        Properties p = consumerProps(group);
        p.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, protocol);
        try (KafkaConsumer<String, String> c = new KafkaConsumer<>(p)) {
            c.subscribe(List.of(topic));
            // 1000 records were produced; admin.deleteRecords removed the first 10 of partition 0
            List<ConsumerRecord<String, String>> got = drain(c, 990);
            require(got.size() == 990, "990 records, got " + got.size());
            c.commitSync();
            Map<TopicPartition, OffsetAndMetadata> committed = c.committed(c.assignment());
            long sum = 0;
            for (OffsetAndMetadata o : committed.values()) {
                sum += o.offset();
            }
            ConsumerGroupDescription d = get(admin.describeConsumerGroups(List.of(group)).describedGroups().get(group));
            Map<String, Object> out = new LinkedHashMap<>();
            out.put("records", got.size());
            out.put("committed", sum);
            out.put("assigned", c.assignment().size());
            out.put("state", d.groupState().toString());
            out.put("type", d.type().toString());
            out.put("members", d.members().size());
            out.put("assignor", d.partitionAssignor());
            return out;
        }
    }

    /** KIP-848's online migration: a classic group becomes a consumer group when a member of the new protocol
     * joins it, the two members share the partitions, and the group is classic again once that member leaves. */
    private Map<String, Object> migrateGroup() throws Exception {
        String group = prefix + "-migration";
        Properties cp = consumerProps(group);
        cp.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, "classic");
        cp.put(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG, 500);
        Map<String, Object> out = new LinkedHashMap<>();
        try (KafkaConsumer<String, String> classic = new KafkaConsumer<>(cp)) {
            classic.subscribe(List.of(topic));
            long deadline = System.currentTimeMillis() + 30000;
            while (classic.assignment().isEmpty() && System.currentTimeMillis() < deadline) {
                classic.poll(Duration.ofMillis(100));
            }
            int all = classic.assignment().size();
            require(all > 1, "the classic member assigned every partition, got " + all);
            out.put("classicAlone", describeType(group));
            Properties np = consumerProps(group);
            np.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, "consumer");
            try (KafkaConsumer<String, String> modern = new KafkaConsumer<>(np)) {
                modern.subscribe(List.of(topic));
                deadline = System.currentTimeMillis() + 60000;
                while (System.currentTimeMillis() < deadline) {
                    classic.poll(Duration.ofMillis(50));
                    modern.poll(Duration.ofMillis(50));
                    Set<TopicPartition> a = classic.assignment(), b = modern.assignment();
                    if (!a.isEmpty() && !b.isEmpty() && a.size() + b.size() == all && Collections.disjoint(a, b)) {
                        break;
                    }
                }
                require(!classic.assignment().isEmpty() && !modern.assignment().isEmpty(),
                        "both members assigned, got " + classic.assignment() + " and " + modern.assignment());
                out.put("shared", describeType(group));
            }
            deadline = System.currentTimeMillis() + 60000;
            while (classic.assignment().size() < all && System.currentTimeMillis() < deadline) {
                classic.poll(Duration.ofMillis(100));
            }
            require(classic.assignment().size() == all, "the classic member owns everything again");
            out.put("classicAgain", describeType(group));
        }
        return out;
    }

    private String describeType(String group) throws Exception {
        return get(admin.describeConsumerGroups(List.of(group)).describedGroups().get(group)).type().toString();
    }

    private void runAll() {
        // ---------------------------------------------------------------- topics
        check("admin.createTopics", () -> {
            NewTopic t = new NewTopic(topic, 3, (short) 1).configs(Map.of("retention.ms", "3600000"));
            var r = admin.createTopics(List.of(t, new NewTopic(txnTopic, 1, (short) 1)));
            r.all().get(TIMEOUT_S, TimeUnit.SECONDS);
            Uuid id = get(r.topicId(topic));
            state.put("topicId", id);
            return Map.of("partitions", get(r.numPartitions(topic)), "topicIdSet", id != null && !Uuid.ZERO_UUID.equals(id));
        });
        check("admin.listTopics", () -> {
            Set<String> names = get(admin.listTopics().names());
            require(names.contains(topic), topic + " listed");
            return Map.of("listed", true);
        });
        check("admin.describeTopics", () -> {
            TopicDescription d = get(admin.describeTopics(TopicCollection.ofTopicNames(List.of(topic))).topicNameValues().get(topic));
            require(d.partitions().size() == 3, "3 partitions");
            require(d.partitions().get(0).leader() != null, "a leader");
            return Map.of("partitions", d.partitions().size(), "isr", d.partitions().get(0).isr().size(),
                    "internal", d.isInternal());
        });
        check("admin.describeTopics.byId", () -> {
            Uuid id = (Uuid) state.get("topicId");
            TopicDescription d = get(admin.describeTopics(TopicCollection.ofTopicIds(List.of(id))).topicIdValues().get(id));
            require(d.name().equals(topic), "the topic's name");
            return Map.of("name", d.name());
        });
        check("admin.describeCluster", () -> {
            DescribeClusterResult r = admin.describeCluster();
            var nodes = get(r.nodes());
            var controller = get(r.controller());
            String clusterId = get(r.clusterId());
            require(clusterId != null && !clusterId.isEmpty(), "a cluster id");
            return Map.of("nodes", nodes.size(), "controller", controller.id());
        });
        ConfigResource topicResource = new ConfigResource(ConfigResource.Type.TOPIC, topic);
        check("admin.describeConfigs", () -> {
            Config c = get(admin.describeConfigs(List.of(topicResource)).values().get(topicResource));
            ConfigEntry e = c.get("retention.ms");
            require(e != null && "3600000".equals(e.value()), "retention.ms=3600000");
            require(e.source() == ConfigEntry.ConfigSource.DYNAMIC_TOPIC_CONFIG, "a dynamic topic config");
            return Map.of("entries", c.entries().size());
        });
        check("admin.describeConfigs.broker", () -> {
            String id = String.valueOf(get(admin.describeCluster().nodes()).iterator().next().id());
            ConfigResource b = new ConfigResource(ConfigResource.Type.BROKER, id);
            Config c = get(admin.describeConfigs(List.of(b)).values().get(b));
            require(c.get("log.retention.hours") != null, "log.retention.hours");
            return Map.of("entries", c.entries().size());
        });
        check("admin.incrementalAlterConfigs", () -> {
            get(admin.incrementalAlterConfigs(Map.of(topicResource, List.of(
                    new AlterConfigOp(new ConfigEntry("retention.ms", "7200000"), AlterConfigOp.OpType.SET),
                    new AlterConfigOp(new ConfigEntry("cleanup.policy", "compact"), AlterConfigOp.OpType.APPEND))))
                    .all());
            Config c = get(admin.describeConfigs(List.of(topicResource)).values().get(topicResource));
            require("7200000".equals(c.get("retention.ms").value()), "retention.ms=7200000");
            require(c.get("cleanup.policy").value().contains("compact"), "compact appended");
            get(admin.incrementalAlterConfigs(Map.of(topicResource, List.of(
                    new AlterConfigOp(new ConfigEntry("cleanup.policy", ""), AlterConfigOp.OpType.DELETE)))).all());
            return Map.of("altered", true);
        });
        check("admin.createPartitions", () -> {
            get(admin.createPartitions(Map.of(topic, NewPartitions.increaseTo(4))).all());
            TopicDescription d = get(admin.describeTopics(List.of(topic)).topicNameValues().get(topic));
            require(d.partitions().size() == 4, "4 partitions");
            return Map.of("partitions", 4);
        });

        // ---------------------------------------------------------------- produce and read back
        check("producer.idempotent", () -> {
            Properties p = producerProps();
            p.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, true);
            p.put(ProducerConfig.ACKS_CONFIG, "all");
            try (KafkaProducer<String, String> pr = new KafkaProducer<>(p)) {
                for (int i = 0; i < 1000; i++) {
                    pr.send(new ProducerRecord<>(topic, i % 4, 1_700_000_000_000L + i, "k" + i, "v" + i));
                }
                pr.flush();
            }
            List<ConsumerRecord<String, String>> got = readAll(topic, 4, 1000, "read_uncommitted");
            require(got.size() == 1000, "1000 records read back, got " + got.size());
            Map<Integer, Long> next = new HashMap<>();
            for (ConsumerRecord<String, String> r : got) {
                long want = next.getOrDefault(r.partition(), 0L);
                require(r.offset() == want, "contiguous offsets");
                require(r.value().equals("v" + r.key().substring(1)), "the key's value");
                next.put(r.partition(), want + 1);
            }
            return Map.of("records", got.size());
        });
        check("producer.compression", () -> {
            int total = 0;
            String t = prefix + "-codecs";
            get(admin.createTopics(List.of(new NewTopic(t, 1, (short) 1))).all());
            for (String codec : List.of("gzip", "snappy", "lz4", "zstd")) {
                Properties p = producerProps();
                p.put(ProducerConfig.COMPRESSION_TYPE_CONFIG, codec);
                try (KafkaProducer<String, String> pr = new KafkaProducer<>(p)) {
                    for (int i = 0; i < 100; i++) {
                        pr.send(new ProducerRecord<>(t, codec + i, "value-" + codec + "-" + i)).get();
                        total++;
                    }
                }
            }
            List<ConsumerRecord<String, String>> got = readAll(t, 1, total, "read_uncommitted");
            require(got.size() == total, total + " records, got " + got.size());
            return Map.of("records", got.size());
        });
        TopicPartition p0 = new TopicPartition(topic, 0);
        check("admin.listOffsets.earliest", () -> offsetOf(p0, OffsetSpec.earliest(), 0));
        check("admin.listOffsets.latest", () -> offsetOf(p0, OffsetSpec.latest(), 250));
        check("admin.listOffsets.maxTimestamp", () -> offsetOf(p0, OffsetSpec.maxTimestamp(), 249));
        check("admin.listOffsets.forTimestamp", () -> offsetOf(p0, OffsetSpec.forTimestamp(1_700_000_000_000L + 40), 10));
        check("admin.listOffsets.earliestLocal", () -> offsetOf(p0, OffsetSpec.earliestLocal(), 0));
        check("admin.listOffsets.latestTiered", () -> offsetOf(p0, OffsetSpec.latestTiered(), -1));
        check("admin.deleteRecords", () -> {
            var lw = get(admin.deleteRecords(Map.of(p0, RecordsToDelete.beforeOffset(10))).lowWatermarks().get(p0));
            require(lw.lowWatermark() == 10, "low watermark 10");
            return offsetOf(p0, OffsetSpec.earliest(), 10);
        });
        check("admin.describeLogDirs", () -> {
            int id = get(admin.describeCluster().nodes()).iterator().next().id();
            Map<String, LogDirDescription> dirs = get(admin.describeLogDirs(List.of(id)).allDescriptions()).get(id);
            long size = 0;
            for (LogDirDescription d : dirs.values()) {
                var info = d.replicaInfos().get(p0);
                if (info != null) {
                    size += info.size();
                }
            }
            require(size > 0, "a size for " + p0);
            return Map.of("dirs", dirs.size());
        });
        check("admin.describeReplicaLogDirs", () -> {
            int id = get(admin.describeCluster().nodes()).iterator().next().id();
            TopicPartitionReplica r = new TopicPartitionReplica(topic, 0, id);
            var info = get(admin.describeReplicaLogDirs(List.of(r)).values().get(r));
            require(info.getCurrentReplicaLogDir() != null, "a current log dir");
            return Map.of("found", true);
        });

        // ---------------------------------------------------------------- features
        check("admin.describeFeatures", () -> {
            var f = get(admin.describeFeatures().featureMetadata());
            Map<String, Object> out = new LinkedHashMap<>();
            f.finalizedFeatures().forEach((k, v) -> out.put(k, (int) v.maxVersionLevel()));
            return out;
        });
        check("admin.updateFeatures.validateOnly", () -> {
            get(admin.updateFeatures(Map.of("transaction.version",
                    new FeatureUpdate((short) 2, FeatureUpdate.UpgradeType.UPGRADE)),
                    new UpdateFeaturesOptions().validateOnly(true)).all());
            return Map.of("validated", true);
        });

        // ---------------------------------------------------------------- transactions
        String tid = prefix + "-tid";
        check("producer.transactional", () -> {
            Properties p = producerProps();
            p.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, tid);
            try (KafkaProducer<String, String> pr = new KafkaProducer<>(p)) {
                pr.initTransactions();
                pr.beginTransaction();
                for (int i = 0; i < 100; i++) {
                    pr.send(new ProducerRecord<>(txnTopic, 0, null, "committed-" + i));
                }
                pr.commitTransaction();
                pr.beginTransaction();
                for (int i = 0; i < 50; i++) {
                    pr.send(new ProducerRecord<>(txnTopic, 0, null, "aborted-" + i));
                }
                pr.flush();
                pr.abortTransaction();
            }
            List<ConsumerRecord<String, String>> committed = readAll(txnTopic, 1, 100, "read_committed");
            require(committed.size() == 100, "100 committed records, got " + committed.size());
            for (ConsumerRecord<String, String> r : committed) {
                require(r.value().startsWith("committed-"), "no aborted record under read_committed");
            }
            List<ConsumerRecord<String, String>> all = readAll(txnTopic, 1, 150, "read_uncommitted");
            require(all.size() == 150, "150 records under read_uncommitted, got " + all.size());
            return Map.of("readCommitted", committed.size(), "readUncommitted", all.size());
        });
        TopicPartition t0 = new TopicPartition(txnTopic, 0);
        check("admin.listOffsets.latest.readCommitted", () -> {
            ListOffsetsResult r = admin.listOffsets(Map.of(t0, OffsetSpec.latest()),
                    new org.apache.kafka.clients.admin.ListOffsetsOptions(IsolationLevel.READ_COMMITTED));
            return Map.of("offset", get(r.partitionResult(t0)).offset());
        });
        check("admin.describeProducers", () -> {
            DescribeProducersResult.PartitionProducerState s = get(admin.describeProducers(List.of(t0)).partitionResult(t0));
            require(s.activeProducers().size() == 1, "one producer");
            return Map.of("producers", s.activeProducers().size(),
                    "openTxn", s.activeProducers().get(0).currentTransactionStartOffset().isPresent());
        });
        check("admin.listTransactions", () -> {
            Collection<TransactionListing> l = get(admin.listTransactions().all());
            boolean found = l.stream().anyMatch(t -> t.transactionalId().equals(tid));
            require(found, tid + " listed");
            return Map.of("listed", true);
        });
        check("admin.describeTransactions", () -> {
            TransactionDescription d = get(admin.describeTransactions(List.of(tid)).description(tid));
            return Map.of("state", d.state().toString(), "partitions", d.topicPartitions().size());
        });
        check("admin.fenceProducers", () -> {
            get(admin.fenceProducers(List.of(tid)).all());
            return Map.of("fenced", true);
        });
        check("admin.abortTransaction", () -> {
            Properties p = producerProps();
            p.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, tid + "-abort");
            try (KafkaProducer<String, String> pr = new KafkaProducer<>(p)) {
                pr.initTransactions();
                pr.beginTransaction();
                RecordMetadata md = pr.send(new ProducerRecord<>(txnTopic, 0, null, "hanging")).get();
                DescribeProducersResult.PartitionProducerState s = get(admin.describeProducers(List.of(t0)).partitionResult(t0));
                var open = s.activeProducers().stream()
                        .filter(x -> x.currentTransactionStartOffset().isPresent()).findFirst().orElseThrow();
                get(admin.abortTransaction(new AbortTransactionSpec(t0, open.producerId(), (short) open.producerEpoch(),
                        open.coordinatorEpoch().orElse(0))).all());
                ListOffsetsResult r = admin.listOffsets(Map.of(t0, OffsetSpec.latest()),
                        new org.apache.kafka.clients.admin.ListOffsetsOptions(IsolationLevel.READ_COMMITTED));
                long lso = get(r.partitionResult(t0)).offset();
                require(lso > md.offset(), "the last stable offset past the aborted record");
                return Map.of("aborted", true);
            }
        });

        // ---------------------------------------------------------------- groups
        check("consumer.classic", () -> consumeInGroup("classic"));
        check("consumer.consumer", () -> consumeInGroup("consumer"));
        check("consumer.migration", this::migrateGroup);
        check("admin.listGroups", () -> {
            Collection<GroupListing> all = get(admin.listGroups().all());
            Map<String, Object> out = new LinkedHashMap<>();
            for (GroupListing g : all) {
                if (g.groupId().startsWith(prefix)) {
                    out.put(g.groupId().substring(prefix.length() + 1), g.type().map(Object::toString).orElse("?"));
                }
            }
            return out;
        });
        check("admin.listConsumerGroups", () -> {
            var all = get(admin.listConsumerGroups().all());
            long mine = all.stream().filter(g -> g.groupId().startsWith(prefix)).count();
            return Map.of("groups", mine);
        });
        check("admin.describeClassicGroups", () -> {
            String g = prefix + "-classic";
            var d = get(admin.describeClassicGroups(List.of(g)).describedGroups().get(g));
            return Map.of("state", d.state().toString(), "protocol", d.protocol());
        });
        check("admin.listConsumerGroupOffsets", () -> {
            var offs = get(admin.listConsumerGroupOffsets(prefix + "-classic").partitionsToOffsetAndMetadata());
            long sum = offs.values().stream().mapToLong(OffsetAndMetadata::offset).sum();
            return Map.of("partitions", offs.size(), "sum", sum);
        });
        check("admin.alterConsumerGroupOffsets", () -> {
            String g = prefix + "-classic";
            get(admin.alterConsumerGroupOffsets(g, Map.of(p0, new OffsetAndMetadata(20, "judge"))).all());
            var offs = get(admin.listConsumerGroupOffsets(g).partitionsToOffsetAndMetadata());
            require(offs.get(p0).offset() == 20 && "judge".equals(offs.get(p0).metadata()), "offset 20 with metadata");
            return Map.of("offset", 20);
        });
        check("admin.deleteConsumerGroupOffsets", () -> {
            String g = prefix + "-classic";
            get(admin.deleteConsumerGroupOffsets(g, Set.of(p0)).all());
            var offs = get(admin.listConsumerGroupOffsets(g).partitionsToOffsetAndMetadata());
            require(offs.get(p0) == null, "no offset for " + p0);
            return Map.of("deleted", true);
        });
        check("txn.sendOffsetsToTransaction", () -> {
            String g = prefix + "-eos";
            String out = prefix + "-eos-out";
            get(admin.createTopics(List.of(new NewTopic(out, 1, (short) 1))).all());
            Properties cp = consumerProps(g);
            cp.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
            Properties pp = producerProps();
            pp.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, prefix + "-eos-tid");
            try (KafkaConsumer<String, String> c = new KafkaConsumer<>(cp);
                 KafkaProducer<String, String> pr = new KafkaProducer<>(pp)) {
                pr.initTransactions();
                c.subscribe(List.of(topic));
                List<ConsumerRecord<String, String>> got = drain(c, 990);
                require(got.size() == 990, "990 records, got " + got.size());
                pr.beginTransaction();
                Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
                for (ConsumerRecord<String, String> r : got) {
                    pr.send(new ProducerRecord<>(out, r.key(), r.value().toUpperCase()));
                    offsets.put(new TopicPartition(r.topic(), r.partition()), new OffsetAndMetadata(r.offset() + 1));
                }
                pr.sendOffsetsToTransaction(offsets, c.groupMetadata());
                pr.commitTransaction();
            }
            var committed = get(admin.listConsumerGroupOffsets(g).partitionsToOffsetAndMetadata());
            long sum = committed.values().stream().mapToLong(OffsetAndMetadata::offset).sum();
            require(sum == 1000, "offsets committed with the transaction (sum 1000), got " + sum);
            require(readAll(out, 1, 990, "read_committed").size() == 990, "990 transformed records");
            return Map.of("committedSum", sum);
        });
        check("admin.removeMembersFromConsumerGroup", () -> {
            Properties p = consumerProps(prefix + "-remove");
            p.put(ConsumerConfig.GROUP_INSTANCE_ID_CONFIG, "static-1");
            p.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, "classic");
            try (KafkaConsumer<String, String> c = new KafkaConsumer<>(p)) {
                c.subscribe(List.of(topic));
                drain(c, 1);
                get(admin.removeMembersFromConsumerGroup(prefix + "-remove",
                        new org.apache.kafka.clients.admin.RemoveMembersFromConsumerGroupOptions(
                                List.of(new org.apache.kafka.clients.admin.MemberToRemove("static-1")))).all());
            }
            return Map.of("removed", true);
        });
        check("admin.deleteConsumerGroups", () -> {
            get(admin.deleteConsumerGroups(List.of(prefix + "-classic")).all());
            var left = get(admin.listGroups().all()).stream().filter(g -> g.groupId().equals(prefix + "-classic")).count();
            require(left == 0, "the group gone");
            return Map.of("deleted", true);
        });

        // ---------------------------------------------------------------- replicas
        check("admin.electLeaders", () -> {
            var r = get(admin.electLeaders(ElectionType.PREFERRED, Set.of(p0)).partitions());
            Optional<Throwable> e = r.get(p0);
            return Map.of("partitionError", e.map(x -> x.getClass().getSimpleName()).orElse("none"));
        });
        check("admin.listPartitionReassignments", () -> {
            var r = get(admin.listPartitionReassignments().reassignments());
            return Map.of("ongoing", r.size());
        });
        check("admin.alterPartitionReassignments", () -> {
            int id = get(admin.describeCluster().nodes()).iterator().next().id();
            get(admin.alterPartitionReassignments(Map.of(p0, Optional.of(new NewPartitionReassignment(List.of(id))))).all());
            return Map.of("reassigned", true);
        });

        // ---------------------------------------------------------------- security and quotas
        ResourcePattern aclTopic = new ResourcePattern(ResourceType.TOPIC, prefix + "-acl", PatternType.LITERAL);
        check("admin.createAcls", () -> {
            get(admin.createAcls(List.of(new AclBinding(aclTopic,
                    new AccessControlEntry("User:alice", "*", AclOperation.READ, AclPermissionType.ALLOW)))).all());
            return Map.of("created", 1);
        });
        check("admin.describeAcls", () -> {
            var found = get(admin.describeAcls(new AclBindingFilter(aclTopic.toFilter(), AccessControlEntryFilter.ANY)).values());
            require(found.size() == 1, "one ACL");
            return Map.of("acls", found.size());
        });
        check("admin.deleteAcls", () -> {
            var deleted = get(admin.deleteAcls(List.of(new AclBindingFilter(
                    new ResourcePatternFilter(ResourceType.TOPIC, prefix + "-acl", PatternType.LITERAL),
                    AccessControlEntryFilter.ANY))).all());
            require(deleted.size() == 1, "one ACL deleted");
            return Map.of("deleted", deleted.size());
        });
        ClientQuotaEntity quotaEntity = new ClientQuotaEntity(Map.of(ClientQuotaEntity.CLIENT_ID, prefix + "-client"));
        check("admin.alterClientQuotas", () -> {
            get(admin.alterClientQuotas(List.of(new ClientQuotaAlteration(quotaEntity,
                    List.of(new ClientQuotaAlteration.Op("producer_byte_rate", 1048576.0))))).all());
            return Map.of("altered", true);
        });
        check("admin.describeClientQuotas", () -> {
            // a KRaft broker learns the quota from the metadata log a moment after the alteration is acknowledged
            long deadline = System.currentTimeMillis() + 10000;
            while (true) {
                var q = get(admin.describeClientQuotas(ClientQuotaFilter.all()).entities());
                if (q.containsKey(quotaEntity) && q.get(quotaEntity).get("producer_byte_rate") == 1048576.0) {
                    return Map.of("found", true);
                }
                require(System.currentTimeMillis() < deadline, "the quota described within 10 s");
                Thread.sleep(100);
            }
        });
        check("admin.alterUserScramCredentials", () -> {
            get(admin.alterUserScramCredentials(List.of(new UserScramCredentialUpsertion(prefix + "-user",
                    new ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 8192), "secret"))).all());
            return Map.of("altered", true);
        });
        check("admin.describeUserScramCredentials", () -> {
            var d = get(admin.describeUserScramCredentials(List.of(prefix + "-user")).description(prefix + "-user"));
            return Map.of("mechanism", d.credentialInfos().get(0).mechanism().toString(),
                    "iterations", d.credentialInfos().get(0).iterations());
        });
        check("admin.createDelegationToken", () -> {
            var t = get(admin.createDelegationToken().delegationToken());
            return Map.of("created", t != null);
        });
        check("admin.describeDelegationToken", () -> Map.of("tokens", get(admin.describeDelegationToken().delegationTokens()).size()));

        // ---------------------------------------------------------------- KRaft, share groups, streams groups, telemetry
        check("admin.describeMetadataQuorum", () -> {
            var q = get(admin.describeMetadataQuorum().quorumInfo());
            return Map.of("leader", q.leaderId(), "voters", q.voters().size());
        });
        check("admin.listConfigResources", () -> Map.of("resources",
                get(admin.listConfigResources(Set.of(ConfigResource.Type.CLIENT_METRICS),
                        new org.apache.kafka.clients.admin.ListConfigResourcesOptions()).all()).size()));
        check("admin.incrementalAlterConfigs.clientMetrics", () -> {
            ConfigResource cm = new ConfigResource(ConfigResource.Type.CLIENT_METRICS, prefix + "-metrics");
            get(admin.incrementalAlterConfigs(Map.of(cm, List.of(
                    new AlterConfigOp(new ConfigEntry("metrics", "org.apache.kafka.producer."), AlterConfigOp.OpType.SET),
                    new AlterConfigOp(new ConfigEntry("interval.ms", "5000"), AlterConfigOp.OpType.SET)))).all());
            return Map.of("altered", true);
        });
        check("admin.clientInstanceId", () -> {
            Properties p = new Properties();
            p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
            p.put(AdminClientConfig.ENABLE_METRICS_PUSH_CONFIG, true);  // KIP-714 client telemetry
            try (Admin telemetry = Admin.create(p)) {
                return Map.of("idSet", telemetry.clientInstanceId(Duration.ofSeconds(10)) != null);
            }
        });
        check("admin.describeShareGroups", () -> {
            var d = get(admin.describeShareGroups(List.of(prefix + "-share")).describedGroups().get(prefix + "-share"));
            return Map.of("state", d.groupState().toString());
        });
        check("admin.describeStreamsGroups", () -> {
            var d = get(admin.describeStreamsGroups(List.of(prefix + "-streams")).describedGroups().get(prefix + "-streams"));
            return Map.of("state", d.groupState().toString());
        });
        check("admin.unregisterBroker", () -> {
            get(admin.unregisterBroker(12345).all());
            return Map.of("unregistered", true);
        });
        check("admin.addRaftVoter", () -> {
            get(admin.addRaftVoter(12345, Uuid.randomUuid(), Set.of(
                    new org.apache.kafka.clients.admin.RaftVoterEndpoint("CONTROLLER", "127.0.0.1", 1))).all());
            return Map.of("added", true);
        });

        // ---------------------------------------------------------------- clean-up
        check("admin.deleteTopics", () -> {
            get(admin.deleteTopics(TopicCollection.ofTopicNames(List.of(topic, txnTopic))).all());
            Set<String> left = new HashSet<>(get(admin.listTopics().names()));
            return Map.of("gone", !left.contains(topic));
        });
    }

    private Map<String, Object> offsetOf(TopicPartition tp, OffsetSpec spec, long expected) throws Exception {
        ListOffsetsResult.ListOffsetsResultInfo info = get(admin.listOffsets(Map.of(tp, spec)).partitionResult(tp));
        require(info.offset() == expected, "offset " + expected + ", got " + info.offset());
        return Map.of("offset", info.offset());
    }
}
