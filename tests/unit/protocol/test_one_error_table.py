"""Kafka's error codes are defined once, in odradek.protocol.errors: no other module assigns an integer to
one of its names (a second table drifts from the first; modules import the code instead)."""

from __future__ import annotations

import ast
from pathlib import Path

import odradek
from odradek.protocol import errors

CODES = {name for name, value in vars(errors).items() if name.isupper() and isinstance(value, int)}


def test_no_module_defines_a_kafka_error_code_of_its_own() -> None:
    root = Path(odradek.__file__).parent
    table = root / "protocol" / "errors.py"
    found = []
    for path in sorted(root.rglob("*.py")):
        if path == table:
            continue
        for node in ast.parse(path.read_text(), str(path)).body:
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant) \
                    and isinstance(node.value.value, int):
                found += [f"{path.relative_to(root)}:{node.lineno} {t.id}" for t in node.targets
                          if isinstance(t, ast.Name) and t.id in CODES]
    assert found == []
