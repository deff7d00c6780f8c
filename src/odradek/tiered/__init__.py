"""Tiered storage (KIP-405): the remote tier beside the local log of log/.

Kafka's plug-in points and the remote log metadata, as Kafka's storage module defines them:

- ``metadata.py``: RemoteLogSegmentId, RemoteLogSegmentMetadata and its state machine, the partition
  deletion states, and the records of the internal ``__remote_log_metadata`` topic byte for byte as Kafka 4.4
  writes them (RemoteLogMetadataSerde), with the topic's partitioner;
- ``metadata_cache.py``: Kafka's RemoteLogMetadataCache (which remote segment holds an offset of a leader
  epoch, the highest offset copied per epoch, the segments to delete) and RemotePartitionMetadataStore (a
  cache per user partition, rebuilt by replaying the metadata records);
- ``storage.py``: the RemoteStorageManager interface and two stores, ``FileSystemRemoteStorage`` (a
  directory; the embedded default) and ``S3RemoteStorage`` (boto3).

- ``plan.py``: the decisions of Kafka's RemoteLogManager tasks, pure: which segments to copy, which remote
  segments retention deletes, where a remote read starts and which batches it returns.

Nothing here does I/O on the local log or runs threads of its own: the broker's RemoteLogManager
(``server/remote_log_manager.py``), which copies closed segments and serves fetches from the remote tier,
builds on it.
"""
