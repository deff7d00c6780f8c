"""Shared by the ACL APIs (CreateAcls, DescribeAcls, DeleteAcls): decoding the wire's enums and
filters into odradek.security.acl values."""

from __future__ import annotations

from typing import Any, TypeVar

from odradek.security.acl import (
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    InvalidAcl,
    PatternType,
    ResourceType,
)

E = TypeVar("E", ResourceType, PatternType, AclOperation, AclPermissionType)

NO_AUTHORIZER = "No Authorizer is configured on the broker"


def enum_value(cls: type[E], raw: int) -> E:
    """The wire's int8 as the enum; values this broker does not know are UNKNOWN (as Kafka's fromCode)."""
    try:
        return cls(int(raw))
    except ValueError:
        return cls(0)


def binding_filter(f: Any) -> AclBindingFilter:
    flt = AclBindingFilter(
        enum_value(ResourceType, f.resource_type_filter),
        f.resource_name_filter,
        enum_value(PatternType, getattr(f, "pattern_type_filter", PatternType.LITERAL)),
        f.principal_filter,
        f.host_filter,
        enum_value(AclOperation, f.operation),
        enum_value(AclPermissionType, f.permission_type),
    )
    flt.validate()
    return flt


__all__ = ["NO_AUTHORIZER", "InvalidAcl", "binding_filter", "enum_value"]
