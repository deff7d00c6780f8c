"""Which ACL each API needs: Kafka's authorization table (KafkaApis and AuthHelper, the "Operations
and Resources on Protocols" table of Kafka's documentation), one entry per API key this broker serves.

Handlers consult it through :meth:`odradek.server.request_context.RequestContext.permits`: the
operation a request needs on a resource type is looked up here by the request's API key, so a
handler names only the resource (``ctx.permits(ResourceType.TOPIC, name)``). The handler registry
refuses to load an API that has no entry (odradek.server.handlers), and an integration test drives
every entry against a broker with an authorizer, once without the ACL and once with it.

``denial`` is what a principal without the ACL gets: Kafka's error code for the resource type
(TOPIC_, GROUP_, CLUSTER_, TRANSACTIONAL_ID_AUTHORIZATION_FAILED), :data:`FILTERED` where Kafka leaves
the resources the principal may not see out of the answer (ListGroups, ListTransactions, Metadata for
all topics), :data:`CLOSED` for the controller-to-broker requests of cluster mode (their JSON bodies
have no error field), or :data:`NONE_NEEDED` for the requests every client must be able to make
(ApiVersions, the SASL exchange, DescribeCluster, which Kafka serves to anyone and only gates the
KIP-430 authorized-operations bits behind DESCRIBE on the cluster).

``any_of``: one of ``ops`` suffices (CreateTopics: CREATE on the cluster or on the topic; ListGroups:
DESCRIBE on the cluster lists every group, else each group the principal may DESCRIBE;
OffsetForLeaderEpoch: CLUSTER_ACTION for a follower or DESCRIBE on the topic; InitProducerId without
a transactional id: IDEMPOTENT_WRITE on the cluster or WRITE on any topic; Fetch: CLUSTER_ACTION for a
follower's fetch, READ on the topic for a consumer's). Otherwise each of ``ops`` is needed on the
resource of that type the request names.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from odradek.protocol import errors
from odradek.security.acl import AclOperation, ResourceType

FILTERED = -1001  # the resource is left out of the answer
CLOSED = -1002  # the connection is closed
NONE_NEEDED = -1003  # served to every authenticated principal

T, G, C, X = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER, ResourceType.TRANSACTIONAL_ID
_TOPIC = errors.TOPIC_AUTHORIZATION_FAILED
_GROUP = errors.GROUP_AUTHORIZATION_FAILED
_CLUSTER = errors.CLUSTER_AUTHORIZATION_FAILED
_TXN = errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
Op = AclOperation


@dataclass(frozen=True, slots=True)
class ApiAcl:
    name: str  # Kafka's ApiKeys name
    ops: Mapping[ResourceType, AclOperation] = field(default_factory=dict)
    denial: int = NONE_NEEDED  # the first check's refusal (see the module docstring)
    any_of: bool = False
    # a second operation on a resource type that changes what is answered, not whether:
    # Metadata's auto-creation (CREATE), the configs CreateTopics returns (DESCRIBE_CONFIGS)
    also: Mapping[ResourceType, AclOperation] = field(default_factory=dict)


API_ACLS: Mapping[int, ApiAcl] = {
    0: ApiAcl("Produce", {T: Op.WRITE, X: Op.WRITE}, _TOPIC),
    1: ApiAcl("Fetch", {T: Op.READ, C: Op.CLUSTER_ACTION}, _TOPIC, any_of=True),
    2: ApiAcl("ListOffsets", {T: Op.DESCRIBE}, _TOPIC),
    3: ApiAcl("Metadata", {T: Op.DESCRIBE}, _TOPIC, also={T: Op.CREATE, C: Op.CREATE}),  # FILTERED: all topics
    4: ApiAcl("LeaderAndIsr", {C: Op.CLUSTER_ACTION}, CLOSED),
    5: ApiAcl("StopReplica", {C: Op.CLUSTER_ACTION}, CLOSED),
    6: ApiAcl("UpdateMetadata", {C: Op.CLUSTER_ACTION}, CLOSED),
    7: ApiAcl("ControlledShutdown", {C: Op.CLUSTER_ACTION}, CLOSED),
    8: ApiAcl("OffsetCommit", {G: Op.READ, T: Op.READ}, _GROUP),
    9: ApiAcl("OffsetFetch", {G: Op.DESCRIBE, T: Op.DESCRIBE}, _GROUP),
    10: ApiAcl("FindCoordinator", {G: Op.DESCRIBE, X: Op.DESCRIBE}, _GROUP),
    11: ApiAcl("JoinGroup", {G: Op.READ}, _GROUP),
    12: ApiAcl("Heartbeat", {G: Op.READ}, _GROUP),
    13: ApiAcl("LeaveGroup", {G: Op.READ}, _GROUP),
    14: ApiAcl("SyncGroup", {G: Op.READ}, _GROUP),
    15: ApiAcl("DescribeGroups", {G: Op.DESCRIBE}, _GROUP),
    16: ApiAcl("ListGroups", {C: Op.DESCRIBE, G: Op.DESCRIBE}, FILTERED, any_of=True),
    17: ApiAcl("SaslHandshake"),
    18: ApiAcl("ApiVersions"),
    19: ApiAcl("CreateTopics", {C: Op.CREATE, T: Op.CREATE}, _TOPIC, any_of=True, also={T: Op.DESCRIBE_CONFIGS}),
    20: ApiAcl("DeleteTopics", {T: Op.DELETE}, _TOPIC),
    21: ApiAcl("DeleteRecords", {T: Op.DELETE}, _TOPIC),
    22: ApiAcl("InitProducerId", {X: Op.WRITE, C: Op.IDEMPOTENT_WRITE}, _TXN),
    23: ApiAcl("OffsetForLeaderEpoch", {T: Op.DESCRIBE, C: Op.CLUSTER_ACTION}, _TOPIC, any_of=True),
    24: ApiAcl("AddPartitionsToTxn", {X: Op.WRITE, T: Op.WRITE, C: Op.CLUSTER_ACTION}, _TXN),
    25: ApiAcl("AddOffsetsToTxn", {X: Op.WRITE, G: Op.READ}, _TXN),
    26: ApiAcl("EndTxn", {X: Op.WRITE}, _TXN),
    27: ApiAcl("WriteTxnMarkers", {C: Op.CLUSTER_ACTION}, _CLUSTER),
    28: ApiAcl("TxnOffsetCommit", {X: Op.WRITE, G: Op.READ, T: Op.READ}, _TXN),
    29: ApiAcl("DescribeAcls", {C: Op.DESCRIBE}, _CLUSTER),
    30: ApiAcl("CreateAcls", {C: Op.ALTER}, _CLUSTER),
    31: ApiAcl("DeleteAcls", {C: Op.ALTER}, _CLUSTER),
    32: ApiAcl("DescribeConfigs", {T: Op.DESCRIBE_CONFIGS, C: Op.DESCRIBE_CONFIGS, G: Op.DESCRIBE_CONFIGS}, _TOPIC),
    33: ApiAcl("AlterConfigs", {T: Op.ALTER_CONFIGS, C: Op.ALTER_CONFIGS, G: Op.ALTER_CONFIGS}, _TOPIC),
    34: ApiAcl("AlterReplicaLogDirs", {C: Op.ALTER}, _CLUSTER),
    35: ApiAcl("DescribeLogDirs", {C: Op.DESCRIBE}, _CLUSTER),
    36: ApiAcl("SaslAuthenticate"),
    37: ApiAcl("CreatePartitions", {T: Op.ALTER}, _TOPIC),
    42: ApiAcl("DeleteGroups", {G: Op.DELETE}, _GROUP),
    43: ApiAcl("ElectLeaders", {C: Op.ALTER}, _CLUSTER),
    44: ApiAcl("IncrementalAlterConfigs", {T: Op.ALTER_CONFIGS, C: Op.ALTER_CONFIGS, G: Op.ALTER_CONFIGS}, _TOPIC),
    45: ApiAcl("AlterPartitionReassignments", {C: Op.ALTER}, _CLUSTER),
    46: ApiAcl("ListPartitionReassignments", {C: Op.DESCRIBE}, _CLUSTER),
    47: ApiAcl("OffsetDelete", {G: Op.DELETE, T: Op.READ}, _GROUP),
    48: ApiAcl("DescribeClientQuotas", {C: Op.DESCRIBE_CONFIGS}, _CLUSTER),
    49: ApiAcl("AlterClientQuotas", {C: Op.ALTER_CONFIGS}, _CLUSTER),
    50: ApiAcl("DescribeUserScramCredentials", {C: Op.DESCRIBE}, _CLUSTER),
    51: ApiAcl("AlterUserScramCredentials", {C: Op.ALTER}, _CLUSTER),
    57: ApiAcl("UpdateFeatures", {C: Op.ALTER}, _CLUSTER),
    60: ApiAcl("DescribeCluster"),  # the authorized operations need DESCRIBE on the cluster
    61: ApiAcl("DescribeProducers", {T: Op.READ}, _TOPIC),
    65: ApiAcl("DescribeTransactions", {X: Op.DESCRIBE, T: Op.DESCRIBE}, _TXN),  # topics: FILTERED
    66: ApiAcl("ListTransactions", {X: Op.DESCRIBE}, FILTERED),
    # KIP-848: subscribed topic names need DESCRIBE (else TOPIC_AUTHORIZATION_FAILED), a regex
    # matches only the topics the principal may DESCRIBE
    68: ApiAcl("ConsumerGroupHeartbeat", {G: Op.READ, T: Op.DESCRIBE}, _GROUP),
    # a group whose assignments name a topic the principal may not DESCRIBE: TOPIC_AUTHORIZATION_FAILED
    69: ApiAcl("ConsumerGroupDescribe", {G: Op.DESCRIBE, T: Op.DESCRIBE}, _GROUP),
    # KIP-932 share groups (KafkaApis.handleShareGroupHeartbeatRequest / handleShareFetchRequest / ...)
    76: ApiAcl("ShareGroupHeartbeat", {G: Op.READ, T: Op.DESCRIBE}, _GROUP),
    77: ApiAcl("ShareGroupDescribe", {G: Op.DESCRIBE, T: Op.DESCRIBE}, _GROUP),
    78: ApiAcl("ShareFetch", {G: Op.READ, T: Op.READ}, _GROUP),
    79: ApiAcl("ShareAcknowledge", {G: Op.READ, T: Op.READ}, _GROUP),
    # the share coordinator's RPCs, between brokers (KafkaApis: authorizeClusterOperation CLUSTER_ACTION)
    83: ApiAcl("InitializeShareGroupState", {C: Op.CLUSTER_ACTION}, _CLUSTER),
    84: ApiAcl("ReadShareGroupState", {C: Op.CLUSTER_ACTION}, _CLUSTER),
    85: ApiAcl("WriteShareGroupState", {C: Op.CLUSTER_ACTION}, _CLUSTER),
    86: ApiAcl("DeleteShareGroupState", {C: Op.CLUSTER_ACTION}, _CLUSTER),
    87: ApiAcl("ReadShareGroupStateSummary", {C: Op.CLUSTER_ACTION}, _CLUSTER),
    90: ApiAcl("DescribeShareGroupOffsets", {G: Op.DESCRIBE, T: Op.DESCRIBE}, _GROUP),
    91: ApiAcl("AlterShareGroupOffsets", {G: Op.READ, T: Op.READ}, _GROUP),
    92: ApiAcl("DeleteShareGroupOffsets", {G: Op.DELETE, T: Op.READ}, _GROUP),
    74: ApiAcl("ListConfigResources", {C: Op.DESCRIBE_CONFIGS}, _CLUSTER),
    75: ApiAcl("DescribeTopicPartitions", {T: Op.DESCRIBE}, _TOPIC),
}


def also_operation(api_key: int, resource_type: ResourceType) -> AclOperation:
    """The second operation of ``also`` (KeyError when the API has none on that type)."""
    return API_ACLS[api_key].also[resource_type]


def operation(api_key: int, resource_type: ResourceType) -> AclOperation:
    """The operation a request of ``api_key`` needs on a resource of ``resource_type``; KeyError
    when the table gives the API none on that type (a handler asking is a bug)."""
    return API_ACLS[api_key].ops[resource_type]
