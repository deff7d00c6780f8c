"""The layering of odradek.layers holds for every import line, and docs/architecture.md's table shows it.

Import lines are read with ast (nothing is imported): module-level and function-local imports must be
allowed by the importer's layer (or be one of its listed upward exceptions); imports under
``if TYPE_CHECKING:`` may also name what the layer lists for type checking only. Circles between modules
must be the listed ones, no more and no fewer."""

from __future__ import annotations

from pathlib import Path

import pytest

from odradek import layers

DOC = Path(__file__).resolve().parents[2] / "docs" / "architecture.md"


def test_every_import_is_allowed_by_the_layering() -> None:
    assert layers.violations(layers.all_imports()) == []


def test_the_layering_is_ordered_and_names_real_modules() -> None:
    assert layers.layering_errors() == []


def test_every_allowance_is_used() -> None:
    """So the table's column says what each package does import, not more."""
    assert layers.unused_allowances(layers.all_imports()) == []


def test_every_package_and_top_level_module_has_a_layer() -> None:
    units = {layers.unit_of(m) for m in layers.modules()}
    assert units == set(layers.by_name())


def test_the_circles_are_the_listed_ones() -> None:
    assert layers.circle_errors(layers.all_imports()) == []
    assert all(len(why) > 40 for _, why in (*layers.CIRCLES, *layers.TYPING_CIRCLES))
    assert all(len(u.why) > 40 for layer in layers.LAYERS for u in layer.upward)


def test_committed_table_is_current() -> None:
    text = DOC.read_text(encoding="utf-8")
    assert text == layers.render_table(text), (
        "docs/architecture.md's layers table is stale: run python -m odradek.layers --write docs/architecture.md"
    )
    packages = {layer.name for layer in layers.LAYERS if (layers.SRC / layer.name).is_dir() and layer.name}
    assert set(layers.table_packages(text)) == packages


def test_an_upward_import_is_caught_with_file_and_line(tmp_path: Path) -> None:
    src = tmp_path / "odradek"
    (src / "log").mkdir(parents=True)
    (src / "server").mkdir()
    for f in ("__init__.py", "log/__init__.py", "server/__init__.py", "server/purgatory_like.py", "log/x.py"):
        (src / f).write_text("")
    (src / "log" / "segment.py").write_text(
        "from typing import TYPE_CHECKING\n"
        "import odradek.log.x\n"
        "if TYPE_CHECKING:\n"
        "    from odradek.server import purgatory_like\n"
        "def f() -> None:\n"
        "    from odradek.server.purgatory_like import thing\n"
    )
    found = [i for i in layers.all_imports(src) if i.importer == "log.segment"]
    assert [(i.target, i.line, i.typing_only) for i in found] == [
        ("log.x", 2, False),
        ("server.purgatory_like", 4, True),
        ("server.purgatory_like", 6, False),
    ]
    problems = layers.violations(found)
    assert len(problems) == 2
    assert "log/segment.py:4:" in problems[0] and "under TYPE_CHECKING" in problems[0]
    assert "log/segment.py:6:" in problems[1] and "odradek.server.purgatory_like" in problems[1]


def test_a_circle_is_found() -> None:
    found = [
        layers.Import("a", "a.py", 1, "b", False),
        layers.Import("b", "b.py", 1, "c", False),
        layers.Import("c", "c.py", 1, "a", True),
        layers.Import("c", "c.py", 2, "d", False),
    ]
    assert layers.circles(found, typing=False) == []
    assert layers.all_circles(found) == ([], [frozenset({"a", "b", "c"})])


def test_check_command_passes(capsys: pytest.CaptureFixture[str]) -> None:
    assert layers.main(["--check"]) == 0, capsys.readouterr().out


def test_write_renders_the_column(tmp_path: Path) -> None:
    doc = tmp_path / "a.md"
    doc.write_text("| `log/` | storage | stale |\n| `nope/` | kept | as is |\n")
    assert layers.main(["--write", str(doc)]) == 0
    assert doc.read_text() == "| `log/` | storage | `protocol`, `names`, `fsutil` |\n| `nope/` | kept | as is |\n"
