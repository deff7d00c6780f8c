"""What a request handler may use: its request's context and the broker's services.

Kafka's ``KafkaApis`` is constructed with its collaborators (``ReplicaManager``,
``GroupCoordinator``, ``MetadataCache``, ``ZkAdminManager``, the producer id manager, the
fetch manager, ...) and gets, with each request, a ``RequestChannel.Request`` carrying the
request's header and the connection's listener and address. The handlers here are modules
(``server/handlers/<api>.py``), so both arrive as one argument, a :class:`RequestContext`:

* the request's own fields (API key and version, correlation id, client id), its
  connection's listener and peer, and the two things a handler may do to that connection:
  :meth:`RequestContext.park` a delayed answer, :meth:`RequestContext.close_connection`;
* :attr:`RequestContext.services`, the :class:`BrokerServices` the broker wires once at
  start-up. A handler reaches the broker only through these components; the broker object
  itself is not given to handlers.

Components that are bigger than what handlers use are named by narrow protocols
(:class:`TopicAdmin`, :class:`ProducerIdSource`, :class:`ConnectionHandle`), so a handler
can be driven in a unit test with a fake of just that edge. Each of BrokerServices' components has a
one-member protocol (``HasTopics``, ``HasReplicaManager``, ...); a handler module combines the ones it
uses into its ``Needs`` and reads the services only through its ``services(ctx)``, typed ``Needs``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from odradek.protocol import codec
from odradek.security import api_acls
from odradek.security.acl import CLUSTER_NAME, SUPPORTED_OPERATIONS, AclOperation, ResourceType
from odradek.security.services import OPEN, SecurityServices
from odradek.server.quota.controller_mutation import ControllerMutationQuota
from odradek.server.quota.controller_mutation import new_quota as new_controller_mutation_quota

if TYPE_CHECKING:
    from odradek.config import BrokerConfig
    from odradek.controller.topics import TopicMeta, TopicRegistry
    from odradek.coordinator.runtime import GroupCoordinatorRuntime
    from odradek.coordinator.txn_runtime import TransactionCoordinatorRuntime
    from odradek.log.manager import LogManager
    from odradek.security.sasl import SaslServer
    from odradek.server.cluster import ClusterLink
    from odradek.server.fetch_session import FetchSessionCache
    from odradek.server.finalized_features import FinalizedFeatureCache
    from odradek.server.quota.client_quotas import ClientQuotas
    from odradek.server.replica_manager import ReplicaManager
    from odradek.server.share_services import ShareServices


class ConnectionHandle(Protocol):
    """The connection a request came in on, as its handler sees it."""

    listener: str
    peer: str
    peer_host: str

    @property
    def principal(self) -> str:
        """Kafka's KafkaPrincipal as text: User:ANONYMOUS, User:<SASL user or certificate DN>."""
        ...

    @property
    def sasl(self) -> SaslServer | None:
        """The SASL exchange of a SASL listener's connection."""
        ...

    @property
    def failed_authentication_delay_s(self) -> float: ...

    def sasl_authenticated(self, principal: str) -> int: ...

    def close_after_response(self) -> None: ...

    def park(self, fut: asyncio.Future[Any], cancel: Callable[[], None]) -> None: ...

    def close(self, reason: str | None = None) -> None: ...

    def throttle(self, ms: int) -> None: ...


class TopicAdmin(Protocol):
    """Topic and configuration changes (Kafka's ZkAdminManager): each goes to the metadata
    store, and the controller makes it happen."""

    def create_topic(
        self,
        name: str,
        num_partitions: int,
        replication_factor: int,
        assignment: Mapping[int, list[int]] | None = None,
        configs: Mapping[str, str | None] | None = None,
        *,
        validate_only: bool = False,
    ) -> TopicMeta: ...

    def delete_topic(self, name: str) -> None: ...

    def create_partitions(
        self, name: str, count: int, assignment: list[list[int]] | None, *, validate_only: bool = False
    ) -> None: ...

    def set_topic_configs(self, name: str, configs: Mapping[str, str], *, validate_only: bool = False) -> None: ...

    def set_broker_configs(self, entity: str, configs: Mapping[str, str], *, validate_only: bool = False) -> None: ...

    def set_client_metrics_configs(self, name: str, configs: Mapping[str, str], *,
                                   validate_only: bool = False) -> None: ...

    def set_group_configs(self, group_id: str, configs: Mapping[str, str], *, validate_only: bool = False) -> None: ...


class ProducerIdSource(Protocol):
    """Kafka's ProducerIdManager: unique producer ids for InitProducerId."""

    def next_id(self) -> int: ...


@dataclass(frozen=True, slots=True)
class BrokerServices:
    """The components handlers use, wired once by the broker when it starts."""

    node_id: int
    cluster_id: str
    rack: str | None
    config: BrokerConfig
    topics: TopicRegistry  # the metadata cache (Kafka's MetadataCache) and the topics' configs
    cluster: ClusterLink  # the link to the metadata store and the controller
    replica_manager: ReplicaManager
    log_manager: LogManager
    groups: GroupCoordinatorRuntime
    txn: TransactionCoordinatorRuntime
    fetch_sessions: FetchSessionCache
    producer_ids: ProducerIdSource
    admin: TopicAdmin
    advertised_endpoint: Callable[[str], tuple[str, int]]  # listener name -> (host, port)
    now_ms: Callable[[], int]
    features: FinalizedFeatureCache  # the finalized features (KIP-584) gates read
    quotas: ClientQuotas  # client quotas (KIP-546) and their rates
    security: SecurityServices = OPEN  # SCRAM credentials and the authorizer (none: all allowed)
    fetch_max_bytes: int = 57671680  # fetch.max.bytes: the bound on one Fetch response's record bytes
    share: ShareServices | None = None  # share groups (KIP-932)


# What a handler may need of BrokerServices, one protocol per component (read-only, as BrokerServices is frozen).
# A handler module combines the ones it uses into its own ``Needs`` and reads them through its ``services(ctx)``,
# so the type checker holds it to what it declared (tests/unit/server/test_handler_needs.py).

class HasNodeId(Protocol):
    @property
    def node_id(self) -> int: ...


class HasClusterId(Protocol):
    @property
    def cluster_id(self) -> str: ...


class HasRack(Protocol):
    @property
    def rack(self) -> str | None: ...


class HasConfig(Protocol):
    @property
    def config(self) -> BrokerConfig: ...


class HasTopics(Protocol):
    @property
    def topics(self) -> TopicRegistry: ...


class HasCluster(Protocol):
    @property
    def cluster(self) -> ClusterLink: ...


class HasReplicaManager(Protocol):
    @property
    def replica_manager(self) -> ReplicaManager: ...


class HasLogManager(Protocol):
    @property
    def log_manager(self) -> LogManager: ...


class HasGroups(Protocol):
    @property
    def groups(self) -> GroupCoordinatorRuntime: ...


class HasTxn(Protocol):
    @property
    def txn(self) -> TransactionCoordinatorRuntime: ...


class HasFetchSessions(Protocol):
    @property
    def fetch_sessions(self) -> FetchSessionCache: ...


class HasProducerIds(Protocol):
    @property
    def producer_ids(self) -> ProducerIdSource: ...


class HasAdmin(Protocol):
    @property
    def admin(self) -> TopicAdmin: ...


class HasAdvertisedEndpoint(Protocol):
    @property
    def advertised_endpoint(self) -> Callable[[str], tuple[str, int]]: ...


class HasNowMs(Protocol):
    @property
    def now_ms(self) -> Callable[[], int]: ...


class HasFeatures(Protocol):
    @property
    def features(self) -> FinalizedFeatureCache: ...


class HasQuotas(Protocol):
    @property
    def quotas(self) -> ClientQuotas: ...


class HasSecurity(Protocol):
    @property
    def security(self) -> SecurityServices: ...


class HasFetchMaxBytes(Protocol):
    @property
    def fetch_max_bytes(self) -> int: ...


class HasShare(Protocol):
    @property
    def share(self) -> ShareServices | None: ...

class RequestContext:
    """One request as its handler sees it (Kafka's RequestContext with the broker's services)."""

    __slots__ = ("services", "connection", "api_key", "api_version", "correlation_id", "client_id")

    def __init__(
        self,
        services: BrokerServices,
        connection: ConnectionHandle,
        api_key: int,
        api_version: int,
        correlation_id: int,
        client_id: str | None,
    ) -> None:
        self.services = services
        self.connection = connection
        self.api_key = api_key
        self.api_version = api_version
        self.correlation_id = correlation_id
        self.client_id = client_id

    @property
    def listener(self) -> str:
        """The listener name the request came in on."""
        return self.connection.listener

    @property
    def principal(self) -> str:
        """The authenticated principal of the request's connection (``User:ANONYMOUS`` if none)."""
        return self.connection.principal

    def authorize(self, operation: AclOperation, resource_type: ResourceType, name: str = CLUSTER_NAME) -> bool:
        """Whether the request's principal may do ``operation`` on the resource (Kafka's
        AuthHelper.authorize); always true without an authorizer."""
        security = self.services.security
        if security.acls is None:
            return True
        return security.authorize(self.principal, self.client_host, operation, resource_type, name)

    def resource_filter(self, operation: AclOperation, resource_type: ResourceType) -> Callable[[str], bool] | None:
        """Whether the request's principal, from its host, may do ``operation`` on a resource of
        ``resource_type`` named later (what a coordinator keeps to decide after the request is
        answered: the topics a KIP-848 regex subscription matches); None without an authorizer."""
        security = self.services.security
        if security.acls is None:
            return None
        principal, host = self.principal, self.client_host
        return lambda name: security.authorize(principal, host, operation, resource_type, name)

    def authorize_cluster(self, operation: AclOperation) -> bool:
        return self.authorize(operation, ResourceType.CLUSTER, CLUSTER_NAME)

    def permits(self, resource_type: ResourceType, name: str = CLUSTER_NAME) -> bool:
        """Whether the principal may do to the resource what a request of this API needs: the
        operation is the one :data:`odradek.security.api_acls.API_ACLS` gives the API on the
        resource type (Kafka's authorization table)."""
        return self.authorize(api_acls.operation(self.api_key, resource_type), resource_type, name)

    def authorized_operations(self, resource_type: ResourceType, name: str = CLUSTER_NAME) -> int:
        """KIP-430: the resource's operations the principal may do, one bit per operation code
        (every supported one without an authorizer, as Kafka's AuthHelper.authorizedOperations)."""
        bits = 0
        for op in SUPPORTED_OPERATIONS[resource_type]:
            if self.authorize(op, resource_type, name):
                bits |= 1 << int(op)
        return bits

    def permits_also(self, resource_type: ResourceType, name: str = CLUSTER_NAME) -> bool:
        """Whether the principal may do the API's second operation on the resource (``also`` of
        :data:`odradek.security.api_acls.API_ACLS`: Metadata's auto-creation, CreateTopics' configs)."""
        return self.authorize(api_acls.also_operation(self.api_key, resource_type), resource_type, name)

    def cluster_authorized_operations(self) -> int:
        """KIP-430's cluster bits, given only to a principal that may DESCRIBE the cluster (0 to
        others, as Kafka's AuthHelper.computeDescribeClusterResponse and Metadata below v11)."""
        if not self.authorize(AclOperation.DESCRIBE, ResourceType.CLUSTER, CLUSTER_NAME):
            return 0
        return self.authorized_operations(ResourceType.CLUSTER)

    @property
    def client_host(self) -> str:
        return self.connection.peer_host

    @property
    def peer(self) -> str:
        return self.connection.peer

    @property
    def response_module(self) -> Any:
        return codec.response_module(self.api_key, self.api_version)

    def park(self, fut: asyncio.Future[Any], cancel: Callable[[], None]) -> None:
        """The answer is ``fut``'s (a delayed operation); ``cancel`` drops it if the connection goes."""
        self.connection.park(fut, cancel)

    def close_connection(self, reason: str) -> None:
        self.connection.close(reason)

    @property
    def quota_user(self) -> str:
        """The user client quotas are looked up for: the principal's name (Kafka's quota user is
        KafkaPrincipal.getName: ``alice`` for ``User:alice``, ``ANONYMOUS`` without authentication)."""
        return self.connection.principal.partition(":")[2] or self.connection.principal

    def throttle(self, ms: int) -> None:
        """Mute the connection for ``ms`` after a quota violation (KIP-219)."""
        if ms > 0:
            self.connection.throttle(ms)

    def controller_mutation_quota(self) -> ControllerMutationQuota:
        """The request's controller mutation quota (KIP-599): strict or permissive by version,
        unbounded when no ``controller_mutation_rate`` applies to the principal and client id."""
        svc = self.services
        bucket = svc.quotas.controller_mutation.bucket(self.quota_user, self.client_id or "", svc.now_ms())
        return new_controller_mutation_quota(bucket, svc.now_ms, self.api_key, self.api_version)

    def controller_mutation_throttle(self, quota: ControllerMutationQuota) -> int:
        """The throttle time ``quota`` earned, the connection muted for it (Kafka's
        sendResponseMaybeThrottleWithControllerQuota; the request quota's own is added by
        quota.request_time)."""
        ms = quota.throttle_time_ms()
        self.throttle(ms)
        return ms
