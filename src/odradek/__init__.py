"""Odradek: a Kafka-compatible event-streaming broker written in Python.

``odradek.EmbeddedBroker`` and ``odradek.EmbeddedCluster`` (see :mod:`odradek.embedded`) run brokers
from Python; they are imported on first use, so ``import odradek`` stays cheap for the command line.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

# the package's one version: pyproject.toml reads it (tool.setuptools.dynamic), `odradek --version` prints it
__version__ = "0.1.0"

if TYPE_CHECKING:
    from odradek.embedded import EmbeddedBroker, EmbeddedBrokerError, EmbeddedCluster

__all__ = ["EmbeddedBroker", "EmbeddedBrokerError", "EmbeddedCluster", "__version__"]


def __getattr__(name: str) -> Any:
    if name in ("EmbeddedBroker", "EmbeddedBrokerError", "EmbeddedCluster"):
        from odradek import embedded

        return getattr(embedded, name)
    raise AttributeError(f"module 'odradek' has no attribute {name!r}")
