"""The ``/metrics`` route: Prometheus' text format (0.0.4) of a registry holding the broker's collector."""

from __future__ import annotations

from prometheus_client import CollectorRegistry
from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest
from prometheus_client.registry import Collector

from odradek.http.server import HttpRequest, HttpResponse


class MetricsRoute:
    def __init__(self, collector: Collector) -> None:
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(collector)

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if request.method not in ("GET", "HEAD"):
            return HttpResponse(405, b"GET /metrics\n", headers={"Allow": "GET, HEAD"})
        return HttpResponse(200, generate_latest(self.registry), CONTENT_TYPE_LATEST)
