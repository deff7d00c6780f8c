"""Share groups (KIP-932): the share-partition state machine (``share_partition.py``) and the share coordinator's
``__share_group_state`` records and their application (``share_state.py``). Pure: no I/O, time from a clock."""
