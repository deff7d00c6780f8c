"""What request handlers use of security: the SCRAM credential store and the authorizer."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from odradek.controller.store import MetadataStore
from odradek.security.acl import AclAuthorizer, AclOperation, ResourceType, parse_super_users
from odradek.security.acl_store import AclStore
from odradek.security.credentials import ScramCredentialStore

if TYPE_CHECKING:
    from odradek.config import BrokerConfig


@dataclass(frozen=True)
class SecurityServices:
    credentials: ScramCredentialStore | None = None
    acls: AclStore | None = None  # None: no authorizer.class.name, every request is allowed

    @property
    def authorizer(self) -> AclAuthorizer | None:
        return self.acls.authorizer if self.acls is not None else None

    def authorize(self, principal: str, host: str, operation: AclOperation, resource_type: ResourceType,
                  name: str) -> bool:
        az = self.authorizer
        return az is None or az.authorize(principal, host, operation, resource_type, name)

    def authorize_by_resource_type(self, principal: str, host: str, operation: AclOperation,
                                   resource_type: ResourceType) -> bool:
        az = self.authorizer
        return az is None or az.authorize_by_resource_type(principal, host, operation, resource_type)


OPEN = SecurityServices()


def build_security(config: BrokerConfig, store: MetadataStore) -> SecurityServices:
    """The credential store, and the authorizer when ``authorizer.class.name`` names one."""
    credentials = ScramCredentialStore(store)
    if not (config.raw("authorizer.class.name")[0] or "").strip():
        return SecurityServices(credentials, None)
    authorizer = AclAuthorizer(parse_super_users(config.raw("super.users")[0]),
                               bool(config.get("allow.everyone.if.no.acl.found")))
    expiration = int(config.get("odradek.change.notification.expiration.ms"))
    return SecurityServices(credentials, AclStore(store, authorizer, change_expiration_ms=expiration))


def start_security(security: SecurityServices, run_on_loop: Callable[[Callable[[], None]], object]) -> None:
    """Once the metadata store is connected: load the ACLs and follow their changes."""
    if security.acls is not None:
        security.acls.load()
        security.acls.watch(run_on_loop)
