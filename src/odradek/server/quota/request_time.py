"""``request_percentage`` (KIP-124): the time a handler spent on a request, charged to the
client's request quota as Kafka's ClientRequestQuotaManager charges request-thread time
(nanoseconds * 100 / 1e9 percent-seconds). Over the quota the connection is muted (KIP-219)
and a kio response that has ``throttle_time`` carries the larger of its own and this one.
Only the synchronous part of a handler is measured (a delayed answer's wait is not thread time).
"""

from __future__ import annotations

import dataclasses
import datetime
from typing import Any

from odradek.server.quota.manager import NANOS_TO_PERCENTAGE_PER_SECOND
from odradek.server.request_context import RequestContext


def charge(ctx: RequestContext, elapsed_ns: int, result: Any) -> Any:
    quota = ctx.services.quotas.request
    if not quota.quotas:
        return result
    throttle = quota.record_and_get_throttle_time_ms(
        ctx.quota_user, ctx.client_id or "", elapsed_ns * NANOS_TO_PERCENTAGE_PER_SECOND, ctx.services.now_ms())
    if throttle <= 0:
        return result
    ctx.throttle(throttle)
    current = getattr(result, "throttle_time", None)
    wanted = datetime.timedelta(milliseconds=throttle)
    if isinstance(current, datetime.timedelta) and current < wanted and dataclasses.is_dataclass(result) \
            and not isinstance(result, type):
        result = dataclasses.replace(result, throttle_time=wanted)
    return result
