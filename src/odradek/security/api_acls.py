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
from odradek.protocol.api_keys import ApiKey
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
    ops: Mapping[ResourceType, AclOperation] = field(default_factory=dict)
    denial: int = NONE_NEEDED  # the first check's refusal (see the module docstring)
    any_of: bool = False
    # a second operation on a resource type that changes what is answered, not whether:
    # Metadata's auto-creation (CREATE), the configs CreateTopics returns (DESCRIBE_CONFIGS)
    also: Mapping[ResourceType, AclOperation] = field(default_factory=dict)


API_ACLS: Mapping[int, ApiAcl] = {  # by API key (Kafka's name: protocol.api_keys.api_name)
    ApiKey.PRODUCE: ApiAcl({T: Op.WRITE, X: Op.WRITE}, _TOPIC),
    ApiKey.FETCH: ApiAcl({T: Op.READ, C: Op.CLUSTER_ACTION}, _TOPIC, any_of=True),
    ApiKey.LIST_OFFSETS: ApiAcl({T: Op.DESCRIBE}, _TOPIC),
    ApiKey.METADATA: ApiAcl({T: Op.DESCRIBE}, _TOPIC, also={T: Op.CREATE, C: Op.CREATE}),  # FILTERED: all topics
    ApiKey.LEADER_AND_ISR: ApiAcl({C: Op.CLUSTER_ACTION}, CLOSED),
    ApiKey.STOP_REPLICA: ApiAcl({C: Op.CLUSTER_ACTION}, CLOSED),
    ApiKey.UPDATE_METADATA: ApiAcl({C: Op.CLUSTER_ACTION}, CLOSED),
    ApiKey.CONTROLLED_SHUTDOWN: ApiAcl({C: Op.CLUSTER_ACTION}, CLOSED),
    ApiKey.OFFSET_COMMIT: ApiAcl({G: Op.READ, T: Op.READ}, _GROUP),
    ApiKey.OFFSET_FETCH: ApiAcl({G: Op.DESCRIBE, T: Op.DESCRIBE}, _GROUP),
    ApiKey.FIND_COORDINATOR: ApiAcl({G: Op.DESCRIBE, X: Op.DESCRIBE}, _GROUP),
    ApiKey.JOIN_GROUP: ApiAcl({G: Op.READ}, _GROUP),
    ApiKey.HEARTBEAT: ApiAcl({G: Op.READ}, _GROUP),
    ApiKey.LEAVE_GROUP: ApiAcl({G: Op.READ}, _GROUP),
    ApiKey.SYNC_GROUP: ApiAcl({G: Op.READ}, _GROUP),
    ApiKey.DESCRIBE_GROUPS: ApiAcl({G: Op.DESCRIBE}, _GROUP),
    ApiKey.LIST_GROUPS: ApiAcl({C: Op.DESCRIBE, G: Op.DESCRIBE}, FILTERED, any_of=True),
    ApiKey.SASL_HANDSHAKE: ApiAcl(),
    ApiKey.API_VERSIONS: ApiAcl(),
    ApiKey.CREATE_TOPICS: ApiAcl({C: Op.CREATE, T: Op.CREATE}, _TOPIC, any_of=True, also={T: Op.DESCRIBE_CONFIGS}),
    ApiKey.DELETE_TOPICS: ApiAcl({T: Op.DELETE}, _TOPIC),
    ApiKey.DELETE_RECORDS: ApiAcl({T: Op.DELETE}, _TOPIC),
    ApiKey.INIT_PRODUCER_ID: ApiAcl({X: Op.WRITE, C: Op.IDEMPOTENT_WRITE}, _TXN),
    ApiKey.OFFSET_FOR_LEADER_EPOCH: ApiAcl({T: Op.DESCRIBE, C: Op.CLUSTER_ACTION}, _TOPIC, any_of=True),
    ApiKey.ADD_PARTITIONS_TO_TXN: ApiAcl({X: Op.WRITE, T: Op.WRITE, C: Op.CLUSTER_ACTION}, _TXN),
    ApiKey.ADD_OFFSETS_TO_TXN: ApiAcl({X: Op.WRITE, G: Op.READ}, _TXN),
    ApiKey.END_TXN: ApiAcl({X: Op.WRITE}, _TXN),
    ApiKey.WRITE_TXN_MARKERS: ApiAcl({C: Op.CLUSTER_ACTION}, _CLUSTER),
    ApiKey.TXN_OFFSET_COMMIT: ApiAcl({X: Op.WRITE, G: Op.READ, T: Op.READ}, _TXN),
    ApiKey.DESCRIBE_ACLS: ApiAcl({C: Op.DESCRIBE}, _CLUSTER),
    ApiKey.CREATE_ACLS: ApiAcl({C: Op.ALTER}, _CLUSTER),
    ApiKey.DELETE_ACLS: ApiAcl({C: Op.ALTER}, _CLUSTER),
    ApiKey.DESCRIBE_CONFIGS: ApiAcl({T: Op.DESCRIBE_CONFIGS, C: Op.DESCRIBE_CONFIGS, G: Op.DESCRIBE_CONFIGS}, _TOPIC),
    ApiKey.ALTER_CONFIGS: ApiAcl({T: Op.ALTER_CONFIGS, C: Op.ALTER_CONFIGS, G: Op.ALTER_CONFIGS}, _TOPIC),
    ApiKey.ALTER_REPLICA_LOG_DIRS: ApiAcl({C: Op.ALTER}, _CLUSTER),
    ApiKey.DESCRIBE_LOG_DIRS: ApiAcl({C: Op.DESCRIBE}, _CLUSTER),
    ApiKey.SASL_AUTHENTICATE: ApiAcl(),
    ApiKey.CREATE_PARTITIONS: ApiAcl({T: Op.ALTER}, _TOPIC),
    ApiKey.DELETE_GROUPS: ApiAcl({G: Op.DELETE}, _GROUP),
    ApiKey.ELECT_LEADERS: ApiAcl({C: Op.ALTER}, _CLUSTER),
    ApiKey.INCREMENTAL_ALTER_CONFIGS: ApiAcl({T: Op.ALTER_CONFIGS, C: Op.ALTER_CONFIGS, G: Op.ALTER_CONFIGS}, _TOPIC),
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: ApiAcl({C: Op.ALTER}, _CLUSTER),
    ApiKey.LIST_PARTITION_REASSIGNMENTS: ApiAcl({C: Op.DESCRIBE}, _CLUSTER),
    ApiKey.OFFSET_DELETE: ApiAcl({G: Op.DELETE, T: Op.READ}, _GROUP),
    ApiKey.DESCRIBE_CLIENT_QUOTAS: ApiAcl({C: Op.DESCRIBE_CONFIGS}, _CLUSTER),
    ApiKey.ALTER_CLIENT_QUOTAS: ApiAcl({C: Op.ALTER_CONFIGS}, _CLUSTER),
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: ApiAcl({C: Op.DESCRIBE}, _CLUSTER),
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: ApiAcl({C: Op.ALTER}, _CLUSTER),
    ApiKey.UPDATE_FEATURES: ApiAcl({C: Op.ALTER}, _CLUSTER),
    ApiKey.DESCRIBE_CLUSTER: ApiAcl(),  # the authorized operations need DESCRIBE on the cluster
    ApiKey.DESCRIBE_PRODUCERS: ApiAcl({T: Op.READ}, _TOPIC),
    ApiKey.DESCRIBE_TRANSACTIONS: ApiAcl({X: Op.DESCRIBE, T: Op.DESCRIBE}, _TXN),  # topics: FILTERED
    ApiKey.LIST_TRANSACTIONS: ApiAcl({X: Op.DESCRIBE}, FILTERED),
    # KIP-848: subscribed topic names need DESCRIBE (else TOPIC_AUTHORIZATION_FAILED), a regex
    # matches only the topics the principal may DESCRIBE
    ApiKey.CONSUMER_GROUP_HEARTBEAT: ApiAcl({G: Op.READ, T: Op.DESCRIBE}, _GROUP),
    # a group whose assignments name a topic the principal may not DESCRIBE: TOPIC_AUTHORIZATION_FAILED
    ApiKey.CONSUMER_GROUP_DESCRIBE: ApiAcl({G: Op.DESCRIBE, T: Op.DESCRIBE}, _GROUP),
    # KIP-932 share groups (KafkaApis.handleShareGroupHeartbeatRequest / handleShareFetchRequest / ...)
    ApiKey.SHARE_GROUP_HEARTBEAT: ApiAcl({G: Op.READ, T: Op.DESCRIBE}, _GROUP),
    ApiKey.SHARE_GROUP_DESCRIBE: ApiAcl({G: Op.DESCRIBE, T: Op.DESCRIBE}, _GROUP),
    ApiKey.SHARE_FETCH: ApiAcl({G: Op.READ, T: Op.READ}, _GROUP),
    ApiKey.SHARE_ACKNOWLEDGE: ApiAcl({G: Op.READ, T: Op.READ}, _GROUP),
    # the share coordinator's RPCs, between brokers (KafkaApis: authorizeClusterOperation CLUSTER_ACTION)
    ApiKey.INITIALIZE_SHARE_GROUP_STATE: ApiAcl({C: Op.CLUSTER_ACTION}, _CLUSTER),
    ApiKey.READ_SHARE_GROUP_STATE: ApiAcl({C: Op.CLUSTER_ACTION}, _CLUSTER),
    ApiKey.WRITE_SHARE_GROUP_STATE: ApiAcl({C: Op.CLUSTER_ACTION}, _CLUSTER),
    ApiKey.DELETE_SHARE_GROUP_STATE: ApiAcl({C: Op.CLUSTER_ACTION}, _CLUSTER),
    ApiKey.READ_SHARE_GROUP_STATE_SUMMARY: ApiAcl({C: Op.CLUSTER_ACTION}, _CLUSTER),
    ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS: ApiAcl({G: Op.DESCRIBE, T: Op.DESCRIBE}, _GROUP),
    ApiKey.ALTER_SHARE_GROUP_OFFSETS: ApiAcl({G: Op.READ, T: Op.READ}, _GROUP),
    ApiKey.DELETE_SHARE_GROUP_OFFSETS: ApiAcl({G: Op.DELETE, T: Op.READ}, _GROUP),
    ApiKey.LIST_CONFIG_RESOURCES: ApiAcl({C: Op.DESCRIBE_CONFIGS}, _CLUSTER),
    ApiKey.DESCRIBE_TOPIC_PARTITIONS: ApiAcl({T: Op.DESCRIBE}, _TOPIC),
}


def also_operation(api_key: int, resource_type: ResourceType) -> AclOperation:
    """The second operation of ``also`` (KeyError when the API has none on that type)."""
    return API_ACLS[api_key].also[resource_type]


def operation(api_key: int, resource_type: ResourceType) -> AclOperation:
    """The operation a request of ``api_key`` needs on a resource of ``resource_type``; KeyError
    when the table gives the API none on that type (a handler asking is a bug)."""
    return API_ACLS[api_key].ops[resource_type]
