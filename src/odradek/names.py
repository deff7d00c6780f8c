"""Kafka's legal topic names (``org.apache.kafka.common.internals.Topic.validate``).

A topic name becomes a directory name (``<topic>-<partition>``), so the check is a full match of
``[a-zA-Z0-9._-]{1,249}`` and neither ``.`` nor ``..``. ``re.fullmatch`` is used on purpose: ``$`` in a
``re.match`` pattern also matches before a final newline, which once let ``"evil\\n"`` through.
"""

from __future__ import annotations

import re

MAX_NAME_LENGTH = 249
_LEGAL = re.compile(r"[a-zA-Z0-9._-]+")


def is_legal_topic_name(name: str) -> bool:
    return 0 < len(name) <= MAX_NAME_LENGTH and name not in (".", "..") and _LEGAL.fullmatch(name) is not None


def has_only_legal_characters(name: str) -> bool:
    return _LEGAL.fullmatch(name) is not None
