"""The intended layering of odradek's packages: the one source of what each may import from the others.

``LAYERS`` lists every package and top-level module of ``odradek``, from the bottom up. A layer's
``imports`` name what its modules may import at run time: a package or top-level module (``"log"``), or
one module of a package and what is under it (``"controller.store"``). An entry must name something
*below* the layer in ``LAYERS``; an import of something above is an upward import, allowed only as an
``Upward`` exception naming the importing module and saying why. Imports inside ``if TYPE_CHECKING:``
run only under the type checker: they may also name what ``typing_only`` lists (below or above).
Imports inside functions count as much as those at the top of a module: they still make the dependency.

Import circles between modules are listed in ``CIRCLES`` (at run time) and ``TYPING_CIRCLES`` (closed only
by a ``TYPE_CHECKING`` import), each with the reason it remains.

tests/unit/test_layers.py reads every module's import lines (``ast``; nothing is imported) and fails on an
import these tables do not allow, naming file and line, and on a circle they do not list (or one they list
that is gone). The "imports from odradek" column of docs/architecture.md's table of layers is rendered
from ``LAYERS``: ``python -m odradek.layers --write docs/architecture.md`` rewrites it, and the same test
fails when the committed table differs.
"""

from __future__ import annotations

import argparse
import ast
import functools
import re
import sys
from collections import defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from odradek.graphs import strongly_connected_components

ROOT = "odradek"
SRC = Path(__file__).resolve().parent


@dataclass(frozen=True)
class Upward:
    """An import of a layer above the importer's: a known exception, kept until it is moved down."""

    importer: str  # the importing module, relative to odradek ("metrics.collector")
    target: str  # what it imports ("server.handlers")
    why: str


@dataclass(frozen=True)
class Layer:
    name: str  # a package ("log") or a top-level module ("fsutil"); "" for odradek/__init__.py itself
    imports: tuple[str, ...] = ()
    typing_only: tuple[str, ...] = ()
    upward: tuple[Upward, ...] = ()
    note: str = ""  # said after the list in docs/architecture.md


# From the bottom up. The order is the layering: each layer may import only what is listed before it.
LAYERS: tuple[Layer, ...] = (
    Layer(
        "",
        upward=(
            Upward(
                "",
                "embedded",
                "odradek/__init__.py offers EmbeddedBroker and EmbeddedCluster, imported on first use (a "
                "function-local import in __getattr__), so that `import odradek` stays cheap",
            ),
        ),
        note="(`odradek/__init__.py`)",
    ),
    Layer("_speedups"),  # the C extension (_speedups.c)
    Layer("names"),
    Layer("fsutil"),
    Layer("clock"),  # the broker's clock (Kafka's Time): what time it is, injectable
    Layer("graphs"),
    Layer("purgatory"),
    Layer("re2_syntax"),
    Layer("progress"),
    Layer("config_kafka"),
    Layer("config", ("config_kafka",)),
    Layer("config_check", ("config", "config_kafka")),
    Layer("connection_quotas", ("config",)),
    Layer("protocol", ("names", "_speedups")),
    Layer("log", ("protocol", "names", "fsutil")),
    Layer(
        "metadata",
        ("protocol", "log", "fsutil"),
        note="`log` and `fsutil` for `log_store.py` only: the `__cluster_metadata-0` partition is kept on disk "
        "as Kafka's KafkaMetadataLog keeps it, in a UnifiedLog (odradek.log's `Log`: segments, indexes, the "
        "leader epoch checkpoint, recovery of a torn tail), with its snapshot files written through `fsutil`; "
        "the records, batches, image and delta stay pure",
    ),
    Layer("tiered", ("protocol", "fsutil")),
    # KRaft's quorum as a pure state machine: no asyncio, sockets, server or controller below it
    Layer("raft", ("protocol.errors", "fsutil")),
    Layer(
        "security",
        ("config", "config_check", "protocol"),
        upward=tuple(
            Upward(
                importer,
                target,
                "the SCRAM credentials and the ACLs are kept in the metadata store; controller/ (above, as it "
                "imports client/, which imports security/) holds its interface and the purge of change "
                "notifications, which import nothing above config",
            )
            for importer, target in (
                ("security.services", "controller.store"),
                ("security.credentials", "controller.store"),
                ("security.acl_store", "controller.store"),
                ("security.acl_store", "controller.change_notifications"),
            )
        ),
    ),
    Layer("client", ("protocol", "security", "config")),
    Layer(
        "controller",
        ("protocol", "config", "names", "fsutil", "client.framer", "client.async_wire"),
    ),
    Layer(
        "replication",
        ("log", "protocol", "client", "purgatory", "controller.zk_data", "controller.store", "clock"),
        typing_only=("server.fetch_session",),
    ),
    Layer(
        "coordinator",
        ("log", "protocol", "controller", "replication", "purgatory", "re2_syntax", "client.async_wire"),
        typing_only=("config",),
    ),
    Layer("http", ("connection_quotas",)),
    Layer("metrics", ("protocol", "http")),
    Layer(
        "server",
        (
            "protocol", "log", "tiered", "security", "client", "controller", "replication", "coordinator", "http",
            "metrics", "config", "config_check", "connection_quotas", "fsutil", "purgatory", "clock",
        ),
        upward=(
            Upward("server.broker", "console", "broker.py wires the components; the console is one of them"),
        ),
    ),
    # KRaft over the network: the controller process running raft/'s core on metadata/'s log, with sockets
    Layer(
        "kraft",
        ("raft", "metadata", "protocol", "client.async_wire", "config", "server.meta_properties"),
        note="`server.meta_properties` for the start-up checks of the directories `storage format` wrote; the "
        "controller listener reads frames with `protocol.framing`, as the broker's connections do",
    ),
    Layer(
        "console",
        (
            "server.handlers", "server.request_context", "security", "log", "protocol", "http",
            "metrics.stats", "purgatory", "config", "config_check",
        ),
    ),
    Layer("devcluster"),
    Layer("perf", ("progress",)),
    Layer("pipeline", ("protocol", "client.framer", "_speedups")),
    Layer("verify", ("devcluster", "server.fault_injection", "graphs")),
    Layer(
        "cli",
        (
            "", "server", "client", "config", "perf", "devcluster", "pipeline", "verify", "log", "fsutil",
            "protocol", "progress", "controller", "security", "metadata", "kraft", "raft", "clock",
        ),
        note="`odradek` for its `__version__`; `kraft` and `raft` for `odradek controller` (`controller_cmd.py`); `controller` and `security` for `configs --zookeeper / "
        "--log-dir` (`scram_direct.py`: SCRAM credentials written straight into the store); `log` and "
        "`fsutil` for `log-dirs adopt-strays` (`log_dirs_cmd.py`: the logs, with the broker stopped); `metadata` "
        "for `storage format` (`storage_cmd.py`: the bootstrap snapshot of a KRaft metadata log dir)",
    ),
    Layer("embedded", ("cli.broker_cmd", "client", "config", "devcluster", "clock"), typing_only=("server",)),
    Layer("config_doc", ("config", "config_check", "config_kafka")),
    Layer("layers", ("graphs",)),
    Layer("pytest_plugin", ("embedded",), typing_only=("clock",)),
    Layer("__main__", ("cli",)),
)

# Circles between modules at run time (module-level and function-local imports), each a set of modules.
CIRCLES: tuple[tuple[frozenset[str], str], ...] = ()

# Circles closed only by an import under TYPE_CHECKING (the type checker follows them; Python never runs
# them), beyond the run-time ones above.
TYPING_CIRCLES: tuple[tuple[frozenset[str], str], ...] = (
    (
        frozenset({"log.log", "log.log_loader", "log.clean_task"}),
        "a CleanTask carries the Log it cleans, typed, back to LogCleaner.commit; at run time the imports go "
        "one way (log -> log_loader -> clean_task)",
    ),
    (
        frozenset({"coordinator.group.consumer_group", "coordinator.group.consumer_classic"}),
        "ClassicProtocolMembers (classic-protocol members of a KIP-848 group) acts on the ConsumerGroupCoordinator "
        "that makes it (its timers, member updates and reconciliation), typed; at run time consumer_group "
        "imports consumer_classic, and both import the groups' state from consumer_model",
    ),
)


# --- reading the import lines ---------------------------------------------------------------------


@dataclass(frozen=True)
class Import:
    importer: str  # module, relative to odradek ("log.log"; "" for odradek/__init__.py)
    file: str  # the importing file, as odradek/log/log.py
    line: int
    target: str  # module imported, relative to odradek
    typing_only: bool

    def where(self) -> str:
        return f"{self.file}:{self.line}"


def _module_name(path: Path, src: Path) -> str:
    parts = list(path.relative_to(src).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules(src: Path = SRC) -> dict[str, Path | None]:
    """Every module of the package (relative names) and its source; C extensions have none."""
    out: dict[str, Path | None] = {_module_name(p, src): p for p in sorted(src.rglob("*.py"))}
    for c in src.glob("*.c"):  # the C extensions are built from top-level .c files
        out.setdefault(c.stem, None)
    return out


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _walk(node: ast.AST, typing: bool) -> Iterator[tuple[ast.AST, bool]]:
    yield node, typing
    if isinstance(node, ast.If) and _is_type_checking(node.test):
        for stmt in node.body:
            yield from _walk(stmt, True)
        for stmt in node.orelse:
            yield from _walk(stmt, typing)
        return
    for child in ast.iter_child_nodes(node):
        yield from _walk(child, typing)


def _resolve(name: str, known: dict[str, Path | None]) -> str | None:
    """The longest known module that an absolute dotted name falls in ('' is the package itself)."""
    if name != ROOT and not name.startswith(ROOT + "."):
        return None
    rel = name[len(ROOT) + 1 :]
    while rel and rel not in known:
        rel = rel.rpartition(".")[0]
    return rel


def imports_of(module: str, path: Path, known: dict[str, Path | None], file: str) -> Iterator[Import]:
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    is_package = path.name == "__init__.py"
    for node, typing in _walk(tree, False):
        if not isinstance(node, (ast.Import, ast.ImportFrom)):
            continue
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        else:
            if node.level:  # relative: from the module's package upwards
                base = f"{ROOT}.{module}" if module else ROOT
                parts = base.split(".")
                keep = len(parts) - node.level + (1 if is_package else 0)
                base = ".".join(parts[:keep])
                module_name = f"{base}.{node.module}" if node.module else base
            else:
                module_name = node.module or ""
            # `from odradek.server import handlers` imports the module odradek.server.handlers
            names = [f"{module_name}.{a.name}" for a in node.names]
        for name in names:
            target = _resolve(name, known)
            if target is not None and target != module:
                yield Import(module, file, node.lineno, target, typing)


@functools.cache
def all_imports(src: Path = SRC) -> tuple[Import, ...]:
    known = modules(src)
    return tuple(
        i
        for m, p in known.items()
        if p is not None
        for i in imports_of(m, p, known, p.relative_to(src.parent).as_posix())
    )


# --- the rules ------------------------------------------------------------------------------------


def unit_of(module: str) -> str:
    """The layer a module belongs to: its top-level package or module ('' for odradek/__init__.py)."""
    return module.split(".")[0]


def _covers(entry: str, target: str) -> bool:
    if entry == "":
        return target == ""
    return target == entry or target.startswith(entry + ".")


def by_name() -> dict[str, Layer]:
    return {layer.name: layer for layer in LAYERS}


def violations(found: Iterable[Import]) -> list[str]:
    """Each import the layering does not allow: 'file:line: a imports b (why not)'."""
    layers = by_name()
    out: list[str] = []
    for imp in found:
        mine, theirs = unit_of(imp.importer), unit_of(imp.target)
        if mine == theirs and imp.importer != "":
            continue
        layer = layers.get(mine)
        if layer is None:
            out.append(f"{imp.where()}: {mine!r} has no entry in odradek.layers.LAYERS")
            continue
        allowed = list(layer.imports) + [u.target for u in layer.upward if _covers(u.importer, imp.importer)]
        if imp.typing_only:
            allowed += layer.typing_only
        if not any(_covers(entry, imp.target) for entry in allowed):
            kind = "under TYPE_CHECKING " if imp.typing_only else ""
            out.append(
                f"{imp.where()}: {imp.importer or ROOT} imports {ROOT}.{imp.target} {kind}"
                f"but layer {mine or ROOT!r} may import only {sorted(allowed)}"
            )
    return out


def unused_allowances(found: Iterable[Import]) -> list[str]:
    """Entries of LAYERS that no import uses: the table would claim a dependency that is not there."""
    found = list(found)
    out: list[str] = []
    for layer in LAYERS:
        mine = [i for i in found if unit_of(i.importer) == layer.name and (i.importer or not layer.name)]
        outside = [i for i in mine if unit_of(i.target) != layer.name or not i.importer]
        for entry in layer.imports:
            if not any(_covers(entry, i.target) for i in outside):
                out.append(f"layer {layer.name!r}: nothing imports {entry!r}")
        for entry in layer.typing_only:
            if not any(i.typing_only and _covers(entry, i.target) for i in outside):
                out.append(f"layer {layer.name!r}: nothing imports {entry!r} under TYPE_CHECKING")
        for up in layer.upward:
            if not any(_covers(up.importer, i.importer) and _covers(up.target, i.target) for i in outside):
                out.append(f"layer {layer.name!r}: {up.importer} no longer imports {up.target}")
    return out


def layering_errors() -> list[str]:
    """Entries of LAYERS that break its own order: an import of a layer not below, an unknown name."""
    rank = {layer.name: i for i, layer in enumerate(LAYERS)}
    known = modules()
    out: list[str] = []
    for i, layer in enumerate(LAYERS):
        for entry in (*layer.imports, *layer.typing_only, *(u.target for u in layer.upward)):
            if entry not in known:
                out.append(f"layer {layer.name!r}: {entry!r} is no module of odradek")
        for entry in layer.imports:
            if rank.get(unit_of(entry), len(LAYERS)) >= i:
                out.append(f"layer {layer.name!r}: {entry!r} is not below it; make it an Upward exception")
        for up in layer.upward:
            if unit_of(up.importer) != layer.name or rank[unit_of(up.target)] <= i:
                out.append(f"layer {layer.name!r}: {up} is not an upward import of this layer")
    return out


def circles(found: Iterable[Import], *, typing: bool) -> list[frozenset[str]]:
    """Sets of modules that import each other in a circle (Tarjan's strongly connected components).

    With ``typing`` false only imports Python runs count; with it true the TYPE_CHECKING ones do too.
    odradek/__init__.py is left out: importing any module of the package runs it anyway.
    """
    graph: dict[str, set[str]] = defaultdict(set)
    for imp in found:
        if imp.importer and imp.target and (typing or not imp.typing_only):
            graph[imp.importer].add(imp.target)
            graph[imp.target]
    out = [frozenset(c) for c in strongly_connected_components(graph) if len(c) > 1]
    return sorted(out, key=sorted)


def all_circles(found: Iterable[Import]) -> tuple[list[frozenset[str]], list[frozenset[str]]]:
    """The run-time circles and those the TYPE_CHECKING imports add (compare with CIRCLES, TYPING_CIRCLES)."""
    found = list(found)
    runtime = circles(found, typing=False)
    return runtime, [c for c in circles(found, typing=True) if c not in runtime]


def circle_errors(found: Iterable[Import]) -> list[str]:
    """Circles not listed in CIRCLES / TYPING_CIRCLES, and listed ones that are gone."""
    runtime, typing = all_circles(found)
    out: list[str] = []
    for kind, now, listed in (
        ("circle", runtime, [c for c, _ in CIRCLES]),
        ("typing-only circle", typing, [c for c, _ in TYPING_CIRCLES]),
    ):
        out += [f"{kind} not listed: {', '.join(sorted(c))}" for c in now if c not in listed]
        out += [f"{kind} listed but gone: {', '.join(sorted(c))}" for c in listed if c not in now]
    return out


# --- the table in docs/architecture.md ------------------------------------------------------------


def render_imports(layer: Layer, *, is_package: bool) -> str:
    """The "imports from odradek" cell of a layer."""

    def grouped(entries: Iterable[str]) -> str:
        order: dict[str, list[str]] = {}
        for entry in entries:
            head, _, rest = entry.partition(".")
            subs = order.setdefault(head, [])
            if rest:
                subs.append(rest)
        parts = []
        for head, subs in order.items():
            label = f"`{head or ROOT}`"
            parts.append(f"{label} ({', '.join(f'`{s}`' for s in subs)})" if subs else label)
        return ", ".join(parts)

    own = f"`{layer.name}/`" if is_package else f"`{layer.name}`"
    cell = grouped(layer.imports) if layer.imports else f"nothing outside {own}"
    typing = [t for t in layer.typing_only if not any(_covers(e, t) for e in layer.imports)]
    if typing:
        cell += f"; for type checking only: {grouped(typing)}"
    if layer.upward:
        cell += f"; upward, an exception listed in `layers.py`: {grouped(dict.fromkeys(u.target for u in layer.upward))}"
    if layer.note:
        cell += f"; {layer.note}"
    return cell


_ROW = re.compile(r"^\| `([a-z_]+)/` \|")


def render_table(text: str) -> str:
    """docs/architecture.md with the last column of its table of layers rendered from LAYERS."""
    layers = by_name()
    out = []
    for line in text.splitlines(keepends=True):
        m = _ROW.match(line)
        if m and m.group(1) in layers:
            body = line.rstrip("\n")
            cells = body.split(" | ")
            cells[-1] = render_imports(layers[m.group(1)], is_package=True) + " |"
            line = " | ".join(cells) + ("\n" if line.endswith("\n") else "")
        out.append(line)
    return "".join(out)


def table_packages(text: str) -> list[str]:
    return [m.group(1) for line in text.splitlines() if (m := _ROW.match(line))]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m odradek.layers",
        description="Render the 'imports from odradek' column of docs/architecture.md from odradek.layers.",
    )
    parser.add_argument("--write", metavar="FILE", help="rewrite FILE's table in place")
    parser.add_argument("--check", action="store_true", help="list the imports the layering does not allow")
    args = parser.parse_args(argv)
    if args.check:
        found = all_imports()
        problems = layering_errors() + violations(found) + unused_allowances(found)
        problems += circle_errors(found)
        print("\n".join(problems))
        return 1 if problems else 0
    if args.write:
        path = Path(args.write)
        path.write_text(render_table(path.read_text(encoding="utf-8")), encoding="utf-8")
        return 0
    parser.print_usage(sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
