"""KRaft over the network: the controller process that runs :mod:`odradek.raft`'s quorum core over sockets,
with ``__cluster_metadata-0`` (:mod:`odradek.metadata.log_store`) as its log."""
