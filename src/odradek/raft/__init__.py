"""KRaft's quorum (KIP-595, with KIP-996's pre-vote) as a pure state machine, no I/O of its own.

``state.py``: the epoch states and their transition table; ``client.py``: ``RaftReplica``, one voter
driven by ``tick`` / ``handle`` / ``append``; ``messages.py``: the RPCs it takes and gives, with Kafka's
field names, and its effects; ``log.py``: the log interface it drives (and an in-memory one);
``quorum_store.py``: Kafka's ``quorum-state`` file. See docs/architecture.md, "The Raft quorum".
"""
