"""Odradek inside a Python process: :class:`EmbeddedBroker` and :class:`EmbeddedCluster`.

- ``thread`` mode (:mod:`.thread_runner`): the broker runs on its own event-loop thread in the calling
  process; nothing is spawned, start-up costs no interpreter start.
- ``process`` mode (:mod:`.process_runner`): the broker is ``odradek broker`` in a child process, so
  :meth:`EmbeddedBroker.kill` is a real SIGKILL.
- :class:`EmbeddedCluster`: Debian's ZooKeeper and N brokers in cluster mode (child processes).

The pytest fixtures built on these are in :mod:`odradek.pytest_plugin`.
"""

from __future__ import annotations

from odradek.embedded.broker import EmbeddedBroker, EmbeddedBrokerError
from odradek.embedded.cluster import EmbeddedCluster

__all__ = ["EmbeddedBroker", "EmbeddedBrokerError", "EmbeddedCluster"]
