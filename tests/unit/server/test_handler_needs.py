"""Each handler names what it uses of the broker's services (its ``Needs``, a combination of
request_context's one-component protocols) and reads them only through its ``services(ctx)``, whose
return the type checker holds to ``Needs``: a handler that reaches for another component fails mypy."""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import re
from pathlib import Path
from typing import Protocol

from odradek.server import request_context
from odradek.server.handlers import registry
from odradek.server.request_context import BrokerServices

HANDLERS = Path(request_context.__file__).parent / "handlers"


def _modules() -> list[str]:
    return sorted(p.stem for p in HANDLERS.glob("*.py") if p.stem != "__init__")


def test_services_are_reached_only_through_the_typed_accessor() -> None:
    offenders = []
    for name in _modules():
        src = (HANDLERS / f"{name}.py").read_text()
        for n, line in enumerate(src.splitlines(), 1):
            if re.search(r"\.services\b", line) and line.strip() != "return ctx.services":
                offenders.append(f"{name}.py:{n}: {line.strip()}")
            if "BrokerServices" in line:
                offenders.append(f"{name}.py:{n}: names the whole BrokerServices: {line.strip()}")
    assert not offenders, "\n".join(offenders)


def test_each_needs_is_made_of_the_one_component_protocols() -> None:
    fields = {f.name for f in dataclasses.fields(BrokerServices)}
    for name in _modules():
        mod = importlib.import_module(f"odradek.server.handlers.{name}")
        needs = getattr(mod, "Needs", None)
        if needs is None:
            assert "services(" not in inspect.getsource(mod), name
            continue
        assert Protocol in needs.__mro__ or getattr(needs, "_is_protocol", False), name
        members = {m for base in needs.__mro__ for m, v in vars(base).items() if isinstance(v, property)}
        assert members and members <= fields, (name, members - fields)


def test_there_is_a_protocol_for_every_service() -> None:
    for f in dataclasses.fields(BrokerServices):
        proto = getattr(request_context, "Has" + "".join(w.capitalize() for w in f.name.split("_")))
        assert isinstance(vars(proto)[f.name], property)


def test_served_apis_have_their_modules_checked() -> None:
    assert {h.module.__name__.rsplit(".", 1)[-1] for h in registry.values()} <= set(_modules())
