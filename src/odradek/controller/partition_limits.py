"""How many partitions a request may create, and the cluster may hold — checked before anything is
allocated for them (pure; no I/O).

- Per request: at most :data:`MAX_PARTITIONS_PER_REQUEST` new partitions over all the topics of one
  CreateTopics or CreatePartitions request (automatic creation counts as a request of one topic).
  Kafka's QuorumController bounds every user operation to 10,000 metadata records
  (``MAX_RECORDS_PER_USER_OP``) and refuses a larger one with POLICY_VIOLATION ("Unable to perform
  excessively large batch operation"); here the bound counts partitions, so a topic of exactly
  10,000 partitions is still one legal request.
- Cluster-wide: ``max.partitions`` (KIP-578's name), the most partitions all topics together may
  have; a request that would pass it is refused with POLICY_VIOLATION as well (KIP-578's own error
  code was never added to the protocol, and clients know POLICY_VIOLATION as "not allowed here").

A request asking for 2,147,483,647 partitions is therefore answered from these few comparisons; the
replica assignment, the metadata documents and the logs are only made for a request that passed.
"""

from __future__ import annotations

from collections.abc import Sized

MAX_PARTITIONS_PER_REQUEST = 10_000

EXCESSIVE_BATCH = "Unable to perform excessively large batch operation."


def requested_partitions(num_partitions: int, assignments: Sized | None, default_partitions: int) -> int:
    """The partitions a CreateTopics topic asks for: its explicit assignments, else its count
    (-1: the broker's ``num.partitions``); an invalid count asks for none (it is refused on its own)."""
    if assignments:
        return len(assignments)
    n = default_partitions if num_partitions == -1 else num_partitions
    return max(n, 0)


def request_limit_error(total_new: int) -> str | None:
    """Why ``total_new`` partitions are too many for one request, or None."""
    if total_new > MAX_PARTITIONS_PER_REQUEST:
        return (f"{EXCESSIVE_BATCH} The request would create {total_new} partitions; at most "
                f"{MAX_PARTITIONS_PER_REQUEST} may be created by one request.")
    return None


def cluster_limit_error(existing: int, adding: int, max_partitions: int) -> str | None:
    """Why adding ``adding`` partitions to a cluster holding ``existing`` passes ``max.partitions``, or None."""
    if existing + adding > max_partitions:
        return (f"Creating {adding} partitions would bring the cluster to {existing + adding} partitions, "
                f"more than max.partitions={max_partitions}.")
    return None
