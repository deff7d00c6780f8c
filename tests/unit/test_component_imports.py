"""Components get narrow protocols at construction, never the Broker: no module of the component
packages imports server.broker (entry points that start a broker, such as cli/broker_cmd.py, may)."""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src" / "odradek"
COMPONENTS = ("server", "replication", "coordinator", "controller", "log", "protocol", "client", "console")


def _imports_broker(path: Path) -> bool:
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and node.module == "odradek.server.broker":
            return True
        if isinstance(node, ast.ImportFrom) and node.module == "odradek.server" and any(
            a.name == "broker" for a in node.names
        ):
            return True
        if isinstance(node, ast.Import) and any(a.name == "odradek.server.broker" for a in node.names):
            return True
    return False


def test_no_component_imports_the_broker() -> None:
    offenders = [
        str(p.relative_to(SRC))
        for pkg in COMPONENTS
        for p in sorted((SRC / pkg).rglob("*.py"))
        if p.name != "broker.py" and _imports_broker(p)
    ]
    assert offenders == []


def test_the_check_sees_an_import() -> None:
    assert _imports_broker(SRC / "cli" / "broker_cmd.py")
