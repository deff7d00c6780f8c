"""Real ZooKeeper servers for the cluster tests: re-exported from odradek.devcluster.zookeeper
(see its docstring for the settings and pitfalls)."""

from __future__ import annotations

from odradek.devcluster.zookeeper import JARS, Ensemble, ZooKeeperServer, four_letter, free_port

__all__ = ["JARS", "Ensemble", "ZooKeeperServer", "four_letter", "free_port"]
