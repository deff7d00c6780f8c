package dev.odradek.peer;

import com.fasterxml.jackson.databind.ObjectMapper;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.CompletionException;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.function.Function;
import org.apache.kafka.clients.CommonClientConfigs;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.DescribeClusterOptions;
import org.apache.kafka.clients.admin.DescribeConsumerGroupsOptions;
import org.apache.kafka.clients.admin.DescribeTopicsOptions;
import org.apache.kafka.clients.admin.FeatureUpdate;
import org.apache.kafka.clients.admin.NewPartitionReassignment;
import org.apache.kafka.clients.admin.NewPartitions;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.RecordsToDelete;
import org.apache.kafka.clients.admin.ScramCredentialInfo;
import org.apache.kafka.clients.admin.ScramMechanism;
import org.apache.kafka.clients.admin.UpdateFeaturesOptions;
import org.apache.kafka.clients.admin.UserScramCredentialUpsertion;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.ElectionType;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicCollection;
import org.apache.kafka.common.TopicPartition;
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
 * The authorization mode of the Java judge: each Admin call, producer path (plain, idempotent, transactional) and
 * consumer path (no group, classic group, KIP-848 consumer group) run by a SASL/PLAIN principal that holds no ACL,
 * then again holding exactly the ACLs the call needs (granted just before it, removed just after) by an admin
 * super user who also sets up what the calls act on. One JSON line per check and pass on stdout:
 * {"check": name, "pass": "without" | "with", "outcome": "works", "works (detail)" or the exception class the
 * client raised}. Kafka's ACL table (docs.confluent.io's "Authorization using ACLs", KafkaApis) says which ACL
 * each call needs; the outcomes are compared broker against broker by tests/judges/test_authz.py.
 *
 * <p>Usage: {@code ClientJudge --authz BOOTSTRAP PREFIX ADMIN:PASSWORD USER:PASSWORD}.
 */
final class AuthzJudge {
    private static final ObjectMapper JSON = new ObjectMapper();
    private static final long TIMEOUT_S = 20;
    // a KRaft broker applies an ACL from the metadata log a moment after CreateAcls is acknowledged, and Odradek's
    // from ZooKeeper's watch: each change is waited for until DescribeAcls (answered from the broker's authorizer)
    // shows it, polled every ACL_POLL_MS for at most ACL_SETTLE_TIMEOUT_MS (a fixed 500 ms sleep after each change
    // cost 100 of the 120 s a run took)
    private static final long ACL_POLL_MS = 20;
    private static final long ACL_SETTLE_TIMEOUT_MS = 10000;
    private static final String CLUSTER = "kafka-cluster";

    @FunctionalInterface
    interface Action {
        Object run(String pass) throws Exception;
    }

    private final String bootstrap;
    private final String prefix;
    private final String adminUser;
    private final String adminPassword;
    private final String user;
    private final String userPassword;
    private final Admin admin;
    private final Admin bob;
    private final String topic;
    private final String group;
    private final String txnId;
    private final TopicPartition p0;

    AuthzJudge(String bootstrap, String prefix, String adminCredentials, String userCredentials) {
        this.bootstrap = bootstrap;
        this.prefix = prefix;
        String[] a = adminCredentials.split(":", 2);
        String[] u = userCredentials.split(":", 2);
        this.adminUser = a[0];
        this.adminPassword = a[1];
        this.user = u[0];
        this.userPassword = u[1];
        Properties setUpProps = adminProps(adminUser, adminPassword);
        // the super user's set-up may wait for a broker that has just started, on a loaded machine
        setUpProps.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, 120000);
        setUpProps.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, 30000);
        this.admin = Admin.create(setUpProps);
        this.bob = Admin.create(adminProps(user, userPassword));
        this.topic = prefix + "-authz";
        this.group = prefix + "-authz-group";
        this.txnId = prefix + "-authz-tx";
        this.p0 = new TopicPartition(topic, 0);
    }

    private Properties sasl(String name, String password) {
        Properties p = new Properties();
        p.put(CommonClientConfigs.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(CommonClientConfigs.SECURITY_PROTOCOL_CONFIG, "SASL_PLAINTEXT");
        p.put("sasl.mechanism", "PLAIN");
        p.put("sasl.jaas.config", "org.apache.kafka.common.security.plain.PlainLoginModule required username=\""
                + name + "\" password=\"" + password + "\";");
        return p;
    }

    private Properties adminProps(String name, String password) {
        Properties p = sasl(name, password);
        p.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, 15000);
        p.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, 10000);
        return p;
    }

    private Properties producerProps(String name, String password) {
        Properties p = sasl(name, password);
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, 10000);
        p.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, 12000);
        p.put(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, 10000);
        return p;
    }

    private Properties consumerProps(String name, String password, String groupId) {
        Properties p = sasl(name, password);
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, false);
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        p.put(ConsumerConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, 15000);
        if (groupId != null) {
            p.put(ConsumerConfig.GROUP_ID_CONFIG, groupId);
        }
        return p;
    }

    private static <T> T get(org.apache.kafka.common.KafkaFuture<T> f) throws Exception {
        return f.get(TIMEOUT_S, TimeUnit.SECONDS);
    }

    private static <T> T setUpGet(org.apache.kafka.common.KafkaFuture<T> f) throws Exception {
        return f.get(120, TimeUnit.SECONDS);
    }

    private static void require(boolean condition, String what) {
        if (!condition) {
            throw new IllegalStateException("expected " + what);
        }
    }

    private AclBinding allow(ResourceType type, String name, AclOperation op) {
        return new AclBinding(new ResourcePattern(type, name, PatternType.LITERAL),
                new AccessControlEntry("User:" + user, "*", op, AclPermissionType.ALLOW));
    }

    private AclBinding onTopic(String name, AclOperation op) {
        return allow(ResourceType.TOPIC, name, op);
    }

    private AclBinding onGroup(String name, AclOperation op) {
        return allow(ResourceType.GROUP, name, op);
    }

    private AclBinding onCluster(AclOperation op) {
        return allow(ResourceType.CLUSTER, CLUSTER, op);
    }

    private AclBinding onTxn(String name, AclOperation op) {
        return allow(ResourceType.TRANSACTIONAL_ID, name, op);
    }

    private AclBindingFilter mine() {
        return new AclBindingFilter(ResourcePatternFilter.ANY,
                new AccessControlEntryFilter("User:" + user, null, AclOperation.ANY, AclPermissionType.ANY));
    }

    private void revokeAll() throws Exception {
        get(admin.deleteAcls(List.of(mine())).all());
        settle(Set.of());
    }

    private void grant(List<AclBinding> acls) throws Exception {
        get(admin.createAcls(acls).all());
        settle(new HashSet<>(acls));
    }

    /** Until the broker's authorizer holds exactly {@code want} for the user. */
    private void settle(Set<AclBinding> want) throws Exception {
        long deadline = System.nanoTime() + ACL_SETTLE_TIMEOUT_MS * 1_000_000L;
        while (true) {
            Set<AclBinding> have = new HashSet<>(get(admin.describeAcls(mine()).values()));
            if (have.equals(want)) {
                return;
            }
            if (System.nanoTime() > deadline) {
                throw new IllegalStateException("the ACLs were not applied within " + ACL_SETTLE_TIMEOUT_MS
                        + " ms: DescribeAcls shows " + have + ", expected " + want);
            }
            Thread.sleep(ACL_POLL_MS);
        }
    }

    private static String outcome(Object detail) {
        return detail == null ? "works" : "works (" + detail + ")";
    }

    private static String failure(Throwable t) {
        Throwable cause = t;
        while ((cause instanceof ExecutionException || cause instanceof CompletionException
                || cause.getClass() == RuntimeException.class || cause.getClass() == KafkaException.class)
                && cause.getCause() != null) {
            cause = cause.getCause();
        }
        return cause.getClass().getSimpleName();
    }

    private void emit(String name, String pass, String outcome, String message) {
        emit(name, pass, outcome, message, null);
    }

    private void emit(String name, String pass, String outcome, String message, List<String> acls) {
        Map<String, Object> line = new LinkedHashMap<>();
        line.put("check", name);
        line.put("pass", pass);
        line.put("outcome", outcome);
        line.put("message", message);
        line.put("acls", acls);
        try {
            System.out.println(JSON.writeValueAsString(line));
        } catch (Exception e) {
            System.out.println("{\"check\": \"" + name + "\", \"pass\": \"" + pass + "\", \"outcome\": \"unprintable\"}");
        }
        System.out.flush();
    }

    /** One call, run without any ACL and then with exactly {@code acls}. */
    private void authz(String name, Function<String, List<AclBinding>> acls, Action action) {
        for (String pass : List.of("without", "with")) {
            String result;
            String message = null;
            try {
                revokeAll();
                if (pass.equals("with")) {
                    grant(acls.apply(pass));
                }
                try {
                    result = outcome(action.run(pass));
                } catch (Throwable t) {
                    result = failure(t);
                    message = String.valueOf(t.getMessage());
                }
            } catch (Exception setup) {
                result = "setup failed: " + failure(setup);
                message = String.valueOf(setup.getMessage());
            }
            List<String> granted = new ArrayList<>();
            for (AclBinding b : acls.apply(pass)) {
                granted.add(b.entry().operation() + " " + b.pattern().resourceType());
            }
            emit(name, pass, result, message, granted);
        }
    }

    // --------------------------------------------------------------------------------------------- set-up

    private void setUp() throws Exception {
        setUpGet(admin.createTopics(List.of(new NewTopic(topic, 3, (short) 1),
                new NewTopic(topic + "-del-without", 1, (short) 1),
                new NewTopic(topic + "-del-with", 1, (short) 1),
                new NewTopic(topic + "-delid-without", 1, (short) 1),
                new NewTopic(topic + "-delid-with", 1, (short) 1))).all());
        Properties pp = producerProps(adminUser, adminPassword);
        pp.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, 120000);
        pp.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, 120000);
        try (KafkaProducer<String, String> pr = new KafkaProducer<>(pp)) {
            for (int i = 0; i < 30; i++) {
                pr.send(new ProducerRecord<>(topic, i % 3, "k" + i, "v" + i));
            }
            pr.flush();
        }
        // a group with committed offsets, empty: what the group calls describe, alter and delete
        Map<TopicPartition, OffsetAndMetadata> offsets = Map.of(p0, new OffsetAndMetadata(5),
                new TopicPartition(topic, 1), new OffsetAndMetadata(5));
        for (String g : List.of(group, group + "-del-without", group + "-del-with")) {
            setUpGet(admin.alterConsumerGroupOffsets(g, offsets).all());
        }
        // a committed transaction: what the transaction calls describe
        Properties tp = producerProps(adminUser, adminPassword);
        tp.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, txnId);
        tp.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, 120000);
        tp.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, 120000);
        try (KafkaProducer<String, String> pr = new KafkaProducer<>(tp)) {
            pr.initTransactions();
            pr.beginTransaction();
            pr.send(new ProducerRecord<>(topic, 2, "t", "t"));
            pr.commitTransaction();
        }
    }

    void run() throws Exception {
        try {
            setUp();
        } catch (Exception e) {
            emit("setup", "admin", "setup failed: " + failure(e), String.valueOf(e.getMessage()));
            return;
        }
        ConfigResource topicResource = new ConfigResource(ConfigResource.Type.TOPIC, topic);

        // ------------------------------------------------------------------------------- topics
        authz("admin.createTopics", pass -> List.of(onTopic(topic + "-new-" + pass, AclOperation.CREATE)), pass -> {
            get(bob.createTopics(List.of(new NewTopic(topic + "-new-" + pass, 1, (short) 1))).all());
            return null;
        });
        authz("admin.createTopics.clusterCreate", pass -> List.of(onCluster(AclOperation.CREATE)), pass -> {
            get(bob.createTopics(List.of(new NewTopic(topic + "-cnew-" + pass, 1, (short) 1))).all());
            return null;
        });
        authz("admin.listTopics", pass -> List.of(onTopic(topic, AclOperation.DESCRIBE)),
                pass -> "listed=" + get(bob.listTopics().names()).contains(topic));
        authz("admin.describeTopics", pass -> List.of(onTopic(topic, AclOperation.DESCRIBE)), pass -> {
            var d = get(bob.describeTopics(List.of(topic), new DescribeTopicsOptions().includeAuthorizedOperations(true))
                    .allTopicNames()).get(topic);
            return "partitions=" + d.partitions().size() + " ops=" + new TreeSet<>(d.authorizedOperations());
        });
        Uuid topicId = get(admin.describeTopics(List.of(topic)).allTopicNames()).get(topic).topicId();
        authz("admin.describeTopics.byId", pass -> List.of(onTopic(topic, AclOperation.DESCRIBE)), pass -> {
            var d = get(bob.describeTopics(TopicCollection.ofTopicIds(List.of(topicId)),
                    new DescribeTopicsOptions().includeAuthorizedOperations(true)).allTopicIds()).get(topicId);
            return "name=" + d.name().equals(topic) + " ops=" + new TreeSet<>(d.authorizedOperations());
        });
        authz("admin.describeConfigs.topic", pass -> List.of(onTopic(topic, AclOperation.DESCRIBE_CONFIGS)), pass -> {
            get(bob.describeConfigs(List.of(topicResource)).all());
            return null;
        });
        authz("admin.describeConfigs.broker", pass -> List.of(onCluster(AclOperation.DESCRIBE_CONFIGS)), pass -> {
            String id = String.valueOf(get(admin.describeCluster().nodes()).iterator().next().id());
            ConfigResource b = new ConfigResource(ConfigResource.Type.BROKER, id);
            get(bob.describeConfigs(List.of(b)).all());
            return null;
        });
        authz("admin.incrementalAlterConfigs.topic", pass -> List.of(onTopic(topic, AclOperation.ALTER_CONFIGS)), pass -> {
            get(bob.incrementalAlterConfigs(Map.of(topicResource, List.of(new AlterConfigOp(
                    new ConfigEntry("retention.ms", "7200000"), AlterConfigOp.OpType.SET)))).all());
            return null;
        });
        authz("admin.incrementalAlterConfigs.broker", pass -> List.of(onCluster(AclOperation.ALTER_CONFIGS)), pass -> {
            ConfigResource b = new ConfigResource(ConfigResource.Type.BROKER, "");
            get(bob.incrementalAlterConfigs(Map.of(b, List.of(new AlterConfigOp(
                    new ConfigEntry("log.retention.ms", "604800000"), AlterConfigOp.OpType.SET)))).all());
            return null;
        });
        ConfigResource groupResource = new ConfigResource(ConfigResource.Type.GROUP, group);
        authz("admin.describeConfigs.group", pass -> List.of(onGroup(group, AclOperation.DESCRIBE_CONFIGS)), pass -> {
            get(bob.describeConfigs(List.of(groupResource)).all());
            return null;
        });
        authz("admin.incrementalAlterConfigs.group", pass -> List.of(onGroup(group, AclOperation.ALTER_CONFIGS)),
                pass -> {
                    get(bob.incrementalAlterConfigs(Map.of(groupResource, List.of(new AlterConfigOp(
                            new ConfigEntry("consumer.session.timeout.ms", "45000"), AlterConfigOp.OpType.SET))))
                            .all());
                    return null;
                });
        authz("admin.listConfigResources", pass -> List.of(onCluster(AclOperation.DESCRIBE_CONFIGS)), pass -> {
            get(bob.listConfigResources(Set.of(ConfigResource.Type.CLIENT_METRICS),
                    new org.apache.kafka.clients.admin.ListConfigResourcesOptions()).all());
            return null;
        });
        authz("admin.createPartitions", pass -> List.of(onTopic(topic, AclOperation.ALTER)), pass -> {
            int now = get(admin.describeTopics(List.of(topic)).allTopicNames()).get(topic).partitions().size();
            get(bob.createPartitions(Map.of(topic, NewPartitions.increaseTo(now + 1))).all());
            return null;
        });
        authz("admin.listOffsets", pass -> List.of(onTopic(topic, AclOperation.DESCRIBE)), pass -> {
            long off = get(bob.listOffsets(Map.of(p0, OffsetSpec.latest())).partitionResult(p0)).offset();
            return "offset=" + off;
        });
        authz("admin.deleteRecords", pass -> List.of(onTopic(topic, AclOperation.DELETE)), pass -> {
            long lw = get(bob.deleteRecords(Map.of(p0, RecordsToDelete.beforeOffset(1))).lowWatermarks().get(p0))
                    .lowWatermark();
            return "lowWatermark=" + lw;
        });
        authz("admin.describeProducers", pass -> List.of(onTopic(topic, AclOperation.READ)), pass -> {
            get(bob.describeProducers(List.of(p0)).all());
            return null;
        });
        authz("admin.deleteTopics", pass -> List.of(onTopic(topic + "-del-" + pass, AclOperation.DELETE)), pass -> {
            get(bob.deleteTopics(List.of(topic + "-del-" + pass)).all());
            return null;
        });

        authz("admin.deleteTopics.byId", pass -> List.of(onTopic(topic + "-delid-" + pass, AclOperation.DELETE)),
                pass -> {
                    String t = topic + "-delid-" + pass;
                    Uuid id = get(admin.describeTopics(List.of(t)).allTopicNames()).get(t).topicId();
                    get(bob.deleteTopics(TopicCollection.ofTopicIds(List.of(id))).all());
                    return null;
                });

        // ------------------------------------------------------------------------------- cluster
        authz("admin.describeCluster", pass -> List.of(onCluster(AclOperation.DESCRIBE)), pass -> {
            var r = bob.describeCluster(new DescribeClusterOptions().includeAuthorizedOperations(true));
            get(r.nodes());
            return "ops=" + new TreeSet<>(Optional.ofNullable(get(r.authorizedOperations())).orElse(Set.of()));
        });
        authz("admin.describeFeatures", pass -> List.of(onCluster(AclOperation.DESCRIBE)), pass -> {
            get(bob.describeFeatures().featureMetadata());
            return null;
        });
        authz("admin.updateFeatures", pass -> List.of(onCluster(AclOperation.ALTER)), pass -> {
            get(bob.updateFeatures(Map.of("transaction.version", new FeatureUpdate((short) 2,
                    FeatureUpdate.UpgradeType.UPGRADE)), new UpdateFeaturesOptions().validateOnly(true)).all());
            return null;
        });
        authz("admin.describeLogDirs", pass -> List.of(onCluster(AclOperation.DESCRIBE)), pass -> {
            int id = get(admin.describeCluster().nodes()).iterator().next().id();
            var dirs = get(bob.describeLogDirs(List.of(id)).allDescriptions()).get(id);
            return "dirs=" + dirs.size();
        });
        authz("admin.electLeaders", pass -> List.of(onCluster(AclOperation.ALTER)), pass -> {
            var r = get(bob.electLeaders(ElectionType.PREFERRED, Set.of(p0)).partitions());
            return "partitionError=" + r.get(p0).map(AuthzJudge::failure).orElse("none");
        });
        authz("admin.listPartitionReassignments", pass -> List.of(onCluster(AclOperation.DESCRIBE)), pass -> {
            get(bob.listPartitionReassignments().reassignments());
            return null;
        });
        authz("admin.alterPartitionReassignments", pass -> List.of(onCluster(AclOperation.ALTER)), pass -> {
            get(bob.alterPartitionReassignments(Map.of(p0, Optional.<NewPartitionReassignment>empty())).all());
            return null;
        });
        ResourcePattern aclTopic = new ResourcePattern(ResourceType.TOPIC, prefix + "-acl", PatternType.LITERAL);
        AclBinding aliceRead = new AclBinding(aclTopic,
                new AccessControlEntry("User:alice", "*", AclOperation.READ, AclPermissionType.ALLOW));
        authz("admin.createAcls", pass -> List.of(onCluster(AclOperation.ALTER)), pass -> {
            get(bob.createAcls(List.of(aliceRead)).all());
            return null;
        });
        authz("admin.describeAcls", pass -> List.of(onCluster(AclOperation.DESCRIBE)), pass -> {
            var found = get(bob.describeAcls(new AclBindingFilter(aclTopic.toFilter(), AccessControlEntryFilter.ANY))
                    .values());
            return "acls=" + found.size();
        });
        authz("admin.deleteAcls", pass -> List.of(onCluster(AclOperation.ALTER)), pass -> {
            var deleted = get(bob.deleteAcls(List.of(new AclBindingFilter(aclTopic.toFilter(),
                    AccessControlEntryFilter.ANY))).all());
            return "deleted=" + deleted.size();
        });
        ClientQuotaEntity quotaEntity = new ClientQuotaEntity(Map.of(ClientQuotaEntity.CLIENT_ID, prefix + "-client"));
        authz("admin.alterClientQuotas", pass -> List.of(onCluster(AclOperation.ALTER_CONFIGS)), pass -> {
            get(bob.alterClientQuotas(List.of(new ClientQuotaAlteration(quotaEntity,
                    List.of(new ClientQuotaAlteration.Op("producer_byte_rate", 1048576.0))))).all());
            return null;
        });
        authz("admin.describeClientQuotas", pass -> List.of(onCluster(AclOperation.DESCRIBE_CONFIGS)), pass -> {
            get(bob.describeClientQuotas(ClientQuotaFilter.all()).entities());
            return null;
        });
        authz("admin.alterUserScramCredentials", pass -> List.of(onCluster(AclOperation.ALTER)), pass -> {
            get(bob.alterUserScramCredentials(List.of(new UserScramCredentialUpsertion(prefix + "-scram",
                    new ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 8192), "secret"))).all());
            return null;
        });
        authz("admin.describeUserScramCredentials", pass -> List.of(onCluster(AclOperation.DESCRIBE)), pass -> {
            get(bob.describeUserScramCredentials().all());
            return null;
        });

        // ------------------------------------------------------------------------------- groups
        authz("admin.listGroups", pass -> List.of(onGroup(group, AclOperation.DESCRIBE)), pass -> {
            return "listed=" + get(bob.listGroups().all()).stream().anyMatch(g -> g.groupId().equals(group));
        });
        authz("admin.listGroups.clusterDescribe", pass -> List.of(onCluster(AclOperation.DESCRIBE)),
                pass -> "listed=" + get(bob.listGroups().all()).stream().anyMatch(g -> g.groupId().equals(group)));
        authz("admin.describeConsumerGroups", pass -> List.of(onGroup(group, AclOperation.DESCRIBE)), pass -> {
            var d = get(bob.describeConsumerGroups(List.of(group),
                    new DescribeConsumerGroupsOptions().includeAuthorizedOperations(true)).describedGroups().get(group));
            return "state=" + d.groupState() + " ops=" + new TreeSet<>(d.authorizedOperations());
        });
        authz("admin.describeClassicGroups", pass -> List.of(onGroup(group, AclOperation.DESCRIBE)), pass -> {
            var d = get(bob.describeClassicGroups(List.of(group)).describedGroups().get(group));
            return "state=" + d.state();
        });
        authz("admin.listConsumerGroupOffsets", pass -> List.of(onGroup(group, AclOperation.DESCRIBE),
                onTopic(topic, AclOperation.DESCRIBE)), pass -> {
            var offs = get(bob.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata());
            return "partitions=" + offs.size();
        });
        authz("admin.listConsumerGroupOffsets.groupOnly", pass -> List.of(onGroup(group, AclOperation.DESCRIBE)),
                pass -> {
                    var offs = get(bob.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata());
                    return "partitions=" + offs.size();
                });
        authz("admin.alterConsumerGroupOffsets", pass -> List.of(onGroup(group, AclOperation.READ),
                onTopic(topic, AclOperation.READ)), pass -> {
            get(bob.alterConsumerGroupOffsets(group, Map.of(p0, new OffsetAndMetadata(7))).all());
            return null;
        });
        authz("admin.deleteConsumerGroupOffsets", pass -> List.of(onGroup(group, AclOperation.DELETE),
                onTopic(topic, AclOperation.READ)), pass -> {
            get(bob.deleteConsumerGroupOffsets(group, Set.of(new TopicPartition(topic, 1))).all());
            return null;
        });
        authz("admin.deleteConsumerGroups", pass -> List.of(onGroup(group + "-del-" + pass, AclOperation.DELETE)),
                pass -> {
                    get(bob.deleteConsumerGroups(List.of(group + "-del-" + pass)).all());
                    return null;
                });

        // ------------------------------------------------------------------------------- transactions
        authz("admin.listTransactions", pass -> List.of(onTxn(txnId, AclOperation.DESCRIBE)), pass -> {
            var all = get(bob.listTransactions().all());
            return "listed=" + all.stream().anyMatch(t -> t.transactionalId().equals(txnId));
        });
        authz("admin.describeTransactions", pass -> List.of(onTxn(txnId, AclOperation.DESCRIBE)), pass -> {
            var d = get(bob.describeTransactions(List.of(txnId)).description(txnId));
            return "state=" + d.state();
        });
        authz("admin.fenceProducers", pass -> List.of(onTxn(txnId, AclOperation.WRITE)), pass -> {
            get(bob.fenceProducers(List.of(txnId)).all());
            return null;
        });

        // ------------------------------------------------------------------------------- producer
        authz("producer.send", pass -> List.of(onTopic(topic, AclOperation.WRITE)), pass -> {
            Properties p = producerProps(user, userPassword);
            p.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, false);
            p.put(ProducerConfig.ACKS_CONFIG, "1");
            try (KafkaProducer<String, String> pr = new KafkaProducer<>(p)) {
                pr.send(new ProducerRecord<>(topic, 0, "b", "plain")).get(TIMEOUT_S, TimeUnit.SECONDS);
            }
            return null;
        });
        authz("producer.idempotent", pass -> List.of(onTopic(topic, AclOperation.WRITE)), pass -> {
            Properties p = producerProps(user, userPassword);
            p.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, true);
            p.put(ProducerConfig.ACKS_CONFIG, "all");
            try (KafkaProducer<String, String> pr = new KafkaProducer<>(p)) {
                pr.send(new ProducerRecord<>(topic, 0, "b", "idempotent")).get(TIMEOUT_S, TimeUnit.SECONDS);
            }
            return null;
        });
        authz("producer.idempotent.clusterIdempotentWrite", pass -> List.of(onCluster(AclOperation.IDEMPOTENT_WRITE)),
                pass -> {
                    Properties p = producerProps(user, userPassword);
                    p.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, true);
                    try (KafkaProducer<String, String> pr = new KafkaProducer<>(p)) {
                        pr.send(new ProducerRecord<>(topic, 0, "b", "idempotent")).get(TIMEOUT_S, TimeUnit.SECONDS);
                    }
                    return null;
                });
        authz("producer.transactional", pass -> List.of(onTxn(prefix + "-bob-tx-" + pass, AclOperation.WRITE),
                onTopic(topic, AclOperation.WRITE)), pass -> {
            Properties p = producerProps(user, userPassword);
            p.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, prefix + "-bob-tx-" + pass);
            try (KafkaProducer<String, String> pr = new KafkaProducer<>(p)) {
                pr.initTransactions();
                pr.beginTransaction();
                pr.send(new ProducerRecord<>(topic, 0, "b", "txn"));
                pr.commitTransaction();
            }
            return null;
        });
        authz("producer.transactional.topicOnly", pass -> List.of(onTopic(topic, AclOperation.WRITE)), pass -> {
            Properties p = producerProps(user, userPassword);
            p.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, prefix + "-bob-tx2-" + pass);
            try (KafkaProducer<String, String> pr = new KafkaProducer<>(p)) {
                pr.initTransactions();
            }
            return null;
        });
        // TxnOffsetCommit needs READ on the offsets' topic, as OffsetCommit does
        authz("txn.sendOffsetsToTransaction", pass -> List.of(onTxn(prefix + "-bob-eos-" + pass, AclOperation.WRITE),
                onTopic(topic, AclOperation.WRITE), onTopic(topic, AclOperation.READ),
                onGroup(group, AclOperation.READ)), pass -> {
            Properties p = producerProps(user, userPassword);
            p.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, prefix + "-bob-eos-" + pass);
            try (KafkaProducer<String, String> pr = new KafkaProducer<>(p)) {
                pr.initTransactions();
                pr.beginTransaction();
                pr.send(new ProducerRecord<>(topic, 0, "b", "eos"));
                pr.sendOffsetsToTransaction(Map.of(p0, new OffsetAndMetadata(3)),
                        new org.apache.kafka.clients.consumer.ConsumerGroupMetadata(group));
                pr.commitTransaction();
            }
            return null;
        });
        authz("txn.sendOffsetsToTransaction.noGroup", pass -> List.of(
                onTxn(prefix + "-bob-eos2-" + pass, AclOperation.WRITE), onTopic(topic, AclOperation.WRITE),
                onTopic(topic, AclOperation.READ)), pass -> {
            Properties p = producerProps(user, userPassword);
            p.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, prefix + "-bob-eos2-" + pass);
            try (KafkaProducer<String, String> pr = new KafkaProducer<>(p)) {
                pr.initTransactions();
                pr.beginTransaction();
                pr.send(new ProducerRecord<>(topic, 0, "b", "eos"));
                pr.sendOffsetsToTransaction(Map.of(p0, new OffsetAndMetadata(3)),
                        new org.apache.kafka.clients.consumer.ConsumerGroupMetadata(group));
                pr.commitTransaction();
            }
            return null;
        });

        authz("producer.autoCreate", pass -> List.of(onTopic(topic + "-auto-" + pass, AclOperation.WRITE),
                onTopic(topic + "-auto-" + pass, AclOperation.CREATE)), pass -> {
            Properties p = producerProps(user, userPassword);
            try (KafkaProducer<String, String> pr = new KafkaProducer<>(p)) {
                pr.send(new ProducerRecord<>(topic + "-auto-" + pass, "b", "auto")).get(TIMEOUT_S, TimeUnit.SECONDS);
            }
            return null;
        });

        // ------------------------------------------------------------------------------- consumer
        authz("consumer.partitionsFor", pass -> List.of(onTopic(topic, AclOperation.DESCRIBE)), pass -> {
            try (KafkaConsumer<String, String> c = new KafkaConsumer<>(consumerProps(user, userPassword, null))) {
                return "partitions=" + c.partitionsFor(topic, Duration.ofSeconds(TIMEOUT_S)).size();
            }
        });
        authz("consumer.offsetsForTimes", pass -> List.of(onTopic(topic, AclOperation.DESCRIBE)), pass -> {
            try (KafkaConsumer<String, String> c = new KafkaConsumer<>(consumerProps(user, userPassword, null))) {
                var r = c.offsetsForTimes(Map.of(p0, 0L), Duration.ofSeconds(TIMEOUT_S)).get(p0);
                return "offset=" + (r == null ? "none" : String.valueOf(r.offset()));
            }
        });
        authz("consumer.listTopics", pass -> List.of(onTopic(topic, AclOperation.DESCRIBE)), pass -> {
            try (KafkaConsumer<String, String> c = new KafkaConsumer<>(consumerProps(user, userPassword, null))) {
                return "listed=" + c.listTopics(Duration.ofSeconds(TIMEOUT_S)).containsKey(topic);
            }
        });
        authz("consumer.assign", pass -> List.of(onTopic(topic, AclOperation.READ)), pass -> {
            try (KafkaConsumer<String, String> c = new KafkaConsumer<>(consumerProps(user, userPassword, null))) {
                c.assign(List.of(p0));
                return "records>0=" + !drain(c, 1).isEmpty();
            }
        });
        for (String protocol : List.of("classic", "consumer")) {
            authz("consumer.subscribe." + protocol, pass -> List.of(
                    onGroup(prefix + "-bob-" + protocol + "-" + pass, AclOperation.READ),
                    onTopic(topic, AclOperation.READ)), pass -> {
                Properties p = consumerProps(user, userPassword, prefix + "-bob-" + protocol + "-" + pass);
                p.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, protocol);
                try (KafkaConsumer<String, String> c = new KafkaConsumer<>(p)) {
                    c.subscribe(List.of(topic));
                    boolean got = !drain(c, 1).isEmpty();
                    c.commitSync(Duration.ofSeconds(TIMEOUT_S));
                    return "records>0=" + got;
                }
            });
            authz("consumer.subscribe." + protocol + ".topicOnly", pass -> List.of(onTopic(topic, AclOperation.READ)),
                    pass -> {
                        Properties p = consumerProps(user, userPassword, prefix + "-bob2-" + protocol + "-" + pass);
                        p.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, protocol);
                        try (KafkaConsumer<String, String> c = new KafkaConsumer<>(p)) {
                            c.subscribe(List.of(topic));
                            return "records>0=" + !drain(c, 1).isEmpty();
                        }
                    });
            authz("consumer.subscribe." + protocol + ".groupOnly", pass -> List.of(
                    onGroup(prefix + "-bob3-" + protocol + "-" + pass, AclOperation.READ)), pass -> {
                Properties p = consumerProps(user, userPassword, prefix + "-bob3-" + protocol + "-" + pass);
                p.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, protocol);
                try (KafkaConsumer<String, String> c = new KafkaConsumer<>(p)) {
                    c.subscribe(List.of(topic));
                    return "records>0=" + !drain(c, 1).isEmpty();
                }
            });
        }
        for (String protocol : List.of("classic", "consumer")) {
            authz("consumer.subscribe.pattern." + protocol, pass -> List.of(
                    onGroup(prefix + "-bob4-" + protocol + "-" + pass, AclOperation.READ),
                    onTopic(topic, AclOperation.READ)), pass -> {
                Properties p = consumerProps(user, userPassword, prefix + "-bob4-" + protocol + "-" + pass);
                p.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, protocol);
                try (KafkaConsumer<String, String> c = new KafkaConsumer<>(p)) {
                    c.subscribe(java.util.regex.Pattern.compile(java.util.regex.Pattern.quote(topic)));
                    return "records>0=" + !drain(c, 1).isEmpty();
                }
            });
        }
        authz("consumer.committed", pass -> List.of(onGroup(group, AclOperation.DESCRIBE),
                onTopic(topic, AclOperation.DESCRIBE)), pass -> {
            try (KafkaConsumer<String, String> c = new KafkaConsumer<>(consumerProps(user, userPassword, group))) {
                var m = c.committed(Set.of(new TopicPartition(topic, 2)), Duration.ofSeconds(TIMEOUT_S));
                return "committed=" + m.size();
            }
        });
        try {
            revokeAll();
        } catch (Exception e) {
            emit("teardown", "admin", "failed: " + failure(e), String.valueOf(e.getMessage()));
        }
    }

    private static List<ConsumerRecord<String, String>> drain(KafkaConsumer<String, String> c, int want) {
        List<ConsumerRecord<String, String>> out = new ArrayList<>();
        long deadline = System.currentTimeMillis() + 15000;
        while (out.size() < want && System.currentTimeMillis() < deadline) {
            for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(200))) {
                out.add(r);
            }
        }
        return out;
    }

    void close() {
        bob.close(Duration.ofSeconds(5));
        admin.close(Duration.ofSeconds(5));
    }
}
