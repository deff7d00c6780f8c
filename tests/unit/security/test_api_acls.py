"""odradek.security.api_acls: every served API has an entry, and every handler asks the table only
for resource types its entry names (a missing one would be a KeyError on the request path)."""

from __future__ import annotations

import importlib
import inspect
import re

from odradek.protocol.api_keys import api_name
from odradek.security.acl import ResourceType
from odradek.security.api_acls import API_ACLS, CLOSED, FILTERED, NONE_NEEDED
from odradek.server.handlers import registry


def test_every_served_api_has_an_entry() -> None:
    missing = sorted(k for k in registry if k not in API_ACLS)
    assert not missing, f"API keys served without an entry in API_ACLS: {missing}"


def test_handlers_ask_only_for_what_their_entry_names() -> None:
    for key, handler in registry.items():
        src = inspect.getsource(handler.module)
        entry = API_ACLS[key]
        for kind, rtype in re.findall(r"ctx\.(permits|permits_also)\(\s*ResourceType\.(\w+)", src):
            table = entry.ops if kind == "permits" else entry.also
            assert ResourceType[rtype] in table, f"{api_name(key)} asks {kind} on {rtype}; the table has {table}"


def test_entries_are_consistent() -> None:
    auth_failed = {29, 30, 31, 53}
    for entry in API_ACLS.values():
        if entry.denial == NONE_NEEDED:
            assert not entry.ops, entry
        else:
            assert entry.ops and (entry.denial in auth_failed or entry.denial in (FILTERED, CLOSED)), entry


def _sources(module: object) -> str:
    """A handler module's source and that of the handler modules it imports helpers from."""
    src = inspect.getsource(module)  # type: ignore[arg-type]
    for name in re.findall(r"^from odradek\.server\.handlers\.(\w+) import", src, re.M):
        src += inspect.getsource(importlib.import_module(f"odradek.server.handlers.{name}"))
    return src


def test_each_handler_asks_for_every_type_its_entry_names() -> None:
    """The reverse: an operation in the table that its handler never checks is a missing check."""
    missing = []
    for key, handler in registry.items():
        asked = {ResourceType[t] for t in re.findall(r"ctx\.permits\(\s*ResourceType\.(\w+)", _sources(handler.module))}
        entry = API_ACLS[key]
        if not set(entry.ops) <= asked:
            missing.append(f"{api_name(key)}: {sorted(t.name for t in set(entry.ops) - asked)}")
    assert not missing, missing
