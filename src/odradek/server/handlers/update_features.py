"""UpdateFeatures (57, KIP-584): upgrade, safe or unsafe downgrade of finalized features, or
validate only (v1+). Only the controller answers (NOT_CONTROLLER elsewhere); the update runs on
the controller's event queue against the /feature znode (controller.features validates, all
updates or none); it needs ALTER on the cluster. v0 carries ``allow_downgrade`` (true: a safe downgrade); v1 ``upgrade_type``.
v0-v1 list one result per feature (each with the request's error); v2 only the top-level error."""

from __future__ import annotations

from typing import Any, Protocol

from odradek.controller.features import SAFE_DOWNGRADE, UPGRADE, FeatureUpdate
from odradek.protocol import errors
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.codec import make
from odradek.security.acl import ResourceType
from odradek.server.handlers import HandlerResult
from odradek.server.request_context import HasCluster, HasFeatures, RequestContext

API_KEY = ApiKey.UPDATE_FEATURES
MIN_VERSION = 0
MAX_VERSION = 2


class Needs(HasCluster, HasFeatures, Protocol):
    """What this handler uses of the broker's services."""


def services(ctx: RequestContext) -> Needs:
    """The broker's services, as this handler may use them."""
    return ctx.services


def _response(m: Any, version: int, names: list[str], code: int, message: str | None) -> Any:
    if version >= 2:
        return make(m.UpdateFeaturesResponse, throttle_time=0, error_code=code, error_message=message)
    results = tuple(make(m.UpdatableFeatureResult, feature=n, error_code=code, error_message=message) for n in names)
    return make(m.UpdateFeaturesResponse, throttle_time=0, error_code=code, error_message=message, results=results)


def _update(version: int, key: Any) -> FeatureUpdate:
    kind = (SAFE_DOWNGRADE if key.allow_downgrade else UPGRADE) if version == 0 else int(key.upgrade_type)
    return FeatureUpdate(key.feature, int(key.max_version_level), kind)


def handle(ctx: RequestContext, request: Any) -> HandlerResult:
    m = ctx.response_module
    version = ctx.api_version
    updates = [_update(version, k) for k in request.feature_updates]
    names = [u.feature for u in updates]
    validate_only = bool(getattr(request, "validate_only", False))
    cluster = services(ctx).cluster
    if not ctx.permits(ResourceType.CLUSTER):  # Kafka: ALTER on the cluster
        return _response(m, version, names, errors.CLUSTER_AUTHORIZATION_FAILED, None)
    if not cluster.controller.active:
        return _response(m, version, names, errors.NOT_CONTROLLER, None)
    if not updates:
        return _response(m, version, names, errors.INVALID_REQUEST, "No feature updates were given.")
    features = services(ctx).features

    def respond(answer: tuple[int, str | None, dict[str, int], int] | None) -> Any:
        if answer is None:  # resigned meanwhile
            return _response(m, version, names, errors.NOT_CONTROLLER, None)
        code, message, finalized, epoch = answer
        if code == errors.NONE and not validate_only and epoch >= 0:
            features.update(finalized, epoch)  # this broker sees it at once; the watch follows
        return _response(m, version, names, code, message)

    return cluster.call_controller("UpdateFeatures", respond, updates=updates, validate_only=validate_only)
