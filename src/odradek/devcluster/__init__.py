"""Development clusters on one machine: Debian's ZooKeeper and several broker processes.

``odradek dev-cluster`` (odradek.cli.dev_cluster_cmd) and the cluster tests use this package.
"""

from __future__ import annotations

from odradek.devcluster.zookeeper import (
    JARS,
    Ensemble,
    ZooKeeperError,
    ZooKeeperServer,
    find_java,
    four_letter,
    free_port,
)

__all__ = ["JARS", "Ensemble", "ZooKeeperError", "ZooKeeperServer", "find_java", "four_letter", "free_port"]
