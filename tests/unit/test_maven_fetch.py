"""peers/maven_fetch.py: a fetch writes into a new folder and swaps it in, so the jars in use stay whole
while Maven runs and after it fails; the stamp is written last; a done fetch runs nothing. Maven is a fake
runner here that writes the files Maven would (no network, no mvn)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "peers"))

import maven_fetch  # noqa: E402
from maven_fetch import COPY_DEPENDENCIES, MavenFetch, MavenRun, PeerError  # noqa: E402


class FakeMaven:
    """Writes ``files`` (relative path -> content) under the ``-Dpeer.target`` it is given; ``during`` runs
    while it "downloads", to look at the target as a running JVM would."""

    def __init__(self, files: dict[str, str], returncode: int = 0, output: str = "",
                 during: Callable[[], None] | None = None) -> None:
        self.files = files
        self.returncode = returncode
        self.output = output
        self.during = during
        self.calls: list[list[str]] = []

    def __call__(self, args: Sequence[str]) -> subprocess.CompletedProcess[str]:
        self.calls.append(list(args))
        target = Path(next(a for a in args if a.startswith("-Dpeer.target="))[len("-Dpeer.target="):])
        if self.during is not None:
            self.during()
        if self.returncode == 0:
            for rel, content in self.files.items():
                (target / rel).parent.mkdir(parents=True, exist_ok=True)
                (target / rel).write_text(content)
        return subprocess.CompletedProcess(["mvn", *args], self.returncode, self.output, "")


def peer(target: Path, stamp: str | None = "hash-1", runs: int = 1) -> MavenFetch:
    poms = tuple(MavenRun(target.parent / f"pom{i}.xml", f"thing {i}") for i in range(runs))
    return MavenFetch(target, poms, required=("libs/a-1.jar", "peer.jar"),
                      stamp=None if stamp is None else (lambda: stamp))


V1 = {"libs/a-1.jar": "a1", "libs/old-only.jar": "x", "peer.jar": "p1"}
V2 = {"libs/a-1.jar": "a2", "libs/b-2.jar": "b2", "peer.jar": "p2"}


def tree(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): p.read_text() for p in sorted(root.rglob("*"))
            if p.is_file() and p.name != maven_fetch.LOCK_NAME}


def test_first_fetch_fills_the_target_and_writes_the_stamp_last(tmp_path: Path) -> None:
    target = tmp_path / "target"
    maven = FakeMaven(V1)
    assert peer(target).fetch(runner=maven) is True
    assert tree(target) == {**V1, "fetched.sha256": "hash-1\n"}
    (args,) = maven.calls
    staging = Path(args[args.index("-f") + 2][len("-Dpeer.target="):])
    assert staging.parent.parent == target and staging.parent.name.startswith(maven_fetch.STAGING_PREFIX)
    assert args[:4] == ["-B", "-q", "-f", str(tmp_path / "pom0.xml")] and args[-1] == COPY_DEPENDENCIES
    assert not list(target.glob(maven_fetch.STAGING_PREFIX + "*"))  # the staging folder is gone


def test_done_fetch_runs_nothing_and_writes_nothing(tmp_path: Path) -> None:
    target = tmp_path / "target"
    peer(target).fetch(runner=FakeMaven(V1))
    before = {p: p.stat().st_mtime_ns for p in target.rglob("*")}
    maven = FakeMaven(V2)
    assert peer(target).done()
    assert peer(target).fetch(runner=maven) is False
    assert maven.calls == []
    assert {p: p.stat().st_mtime_ns for p in target.rglob("*")} == before


def test_refetch_keeps_the_old_jars_in_place_while_maven_runs(tmp_path: Path) -> None:
    target = tmp_path / "target"
    peer(target, "hash-1").fetch(runner=FakeMaven(V1))
    in_use = (target / "libs" / "a-1.jar").open()  # a JVM started from libs/* before the re-fetch
    seen: list[dict[str, str]] = []
    maven = FakeMaven(V2, during=lambda: seen.append(tree(target)))
    assert peer(target, "hash-2").fetch(runner=maven) is True
    assert seen == [{**V1, "fetched.sha256": "hash-1\n"}]  # the classpath was whole all the while
    assert tree(target) == {**V2, "fetched.sha256": "hash-2\n"}  # libs replaced whole: old-only.jar gone
    assert in_use.read() == "a1"  # the open jar stays readable after its folder is removed
    in_use.close()
    assert not list(target.glob(maven_fetch.STAGING_PREFIX + "*"))


def test_refetch_without_an_atomic_exchange_swaps_by_two_renames(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(maven_fetch, "exchange", lambda a, b: False)
    target = tmp_path / "target"
    peer(target, "hash-1").fetch(runner=FakeMaven(V1))
    assert peer(target, "hash-2").fetch(runner=FakeMaven(V2)) is True
    assert tree(target) == {**V2, "fetched.sha256": "hash-2\n"}
    assert not list(target.glob(maven_fetch.STAGING_PREFIX + "*"))


def test_failed_maven_leaves_the_target_as_it_was(tmp_path: Path) -> None:
    target = tmp_path / "target"
    peer(target, "hash-1").fetch(runner=FakeMaven(V1))
    maven = FakeMaven(V2, returncode=1, output="[INFO] x\n[ERROR] Could not resolve dependencies for project\n")
    with pytest.raises(PeerError, match=r"Maven could not fetch thing 0 \(mvn exit 1\): Could not resolve"):
        peer(target, "hash-2").fetch(runner=maven)
    assert tree(target) == {**V1, "fetched.sha256": "hash-1\n"}
    assert not list(target.glob(maven_fetch.STAGING_PREFIX + "*"))


def test_a_fetch_without_a_required_file_is_not_swapped_in(tmp_path: Path) -> None:
    target = tmp_path / "target"
    peer(target, "hash-1").fetch(runner=FakeMaven(V1))
    with pytest.raises(PeerError, match="without peer.jar"):
        peer(target, "hash-2").fetch(runner=FakeMaven({"libs/a-1.jar": "a2"}))
    assert tree(target) == {**V1, "fetched.sha256": "hash-1\n"}


def test_every_run_writes_into_the_same_new_folder(tmp_path: Path) -> None:
    target = tmp_path / "target"
    maven = FakeMaven(V1)
    assert peer(target, runs=2).fetch(runner=maven) is True
    assert [a[a.index("-f") + 1] for a in maven.calls] == [str(tmp_path / "pom0.xml"), str(tmp_path / "pom1.xml")]
    assert len({a[a.index("-f") + 2] for a in maven.calls}) == 1
    assert tree(target) == {**V1, "fetched.sha256": "hash-1\n"}


def test_without_a_stamp_the_required_files_decide(tmp_path: Path) -> None:
    target = tmp_path / "target"
    assert peer(target, stamp=None).fetch(runner=FakeMaven(V1)) is True
    assert tree(target) == V1
    assert peer(target, stamp=None).fetch(runner=FakeMaven(V2)) is False
    (target / "peer.jar").unlink()
    assert peer(target, stamp=None).fetch(runner=FakeMaven(V2)) is True
    assert tree(target) == V2


def test_a_changed_stamp_or_a_missing_file_fetches_again(tmp_path: Path) -> None:
    target = tmp_path / "target"
    peer(target, "hash-1").fetch(runner=FakeMaven(V1))
    assert not peer(target, "hash-2").done()
    (target / "peer.jar").unlink()
    assert not peer(target, "hash-1").done()


def test_leftovers_of_a_killed_fetch_are_removed(tmp_path: Path) -> None:
    target = tmp_path / "target"
    leftover = target / f"{maven_fetch.STAGING_PREFIX}dead/new/libs"
    leftover.mkdir(parents=True)
    peer(target).fetch(runner=FakeMaven(V1))
    assert not (target / f"{maven_fetch.STAGING_PREFIX}dead").exists()


def test_maven_args_from_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(maven_fetch.MAVEN_ARGS_ENV, "-o -s 'my settings.xml'")
    run = MavenRun(tmp_path / "pom.xml", "thing", ("package", COPY_DEPENDENCIES))
    assert run.args(tmp_path / "t", quiet=False) == [
        "-B", "-f", str(tmp_path / "pom.xml"), f"-Dpeer.target={tmp_path / 't'}", "-o", "-s", "my settings.xml",
        "package", COPY_DEPENDENCIES]


def test_swap_in_a_file_and_a_folder(tmp_path: Path) -> None:
    (tmp_path / "new").mkdir()
    (tmp_path / "new" / "f").write_text("new")
    (tmp_path / "dest").mkdir()
    (tmp_path / "dest" / "f").write_text("old")
    maven_fetch.swap_in(tmp_path / "new", tmp_path / "dest", tmp_path / "aside")
    assert (tmp_path / "dest" / "f").read_text() == "new"
    old = tmp_path / "new" if (tmp_path / "new").exists() else tmp_path / "aside"  # exchanged, or set aside
    assert (old / "f").read_text() == "old"
    (tmp_path / "jar.new").write_text("2")
    (tmp_path / "jar").write_text("1")
    maven_fetch.swap_in(tmp_path / "jar.new", tmp_path / "jar", tmp_path / "jar.aside")
    assert (tmp_path / "jar").read_text() == "2" and not (tmp_path / "jar.new").exists()


def test_exchange_swaps_two_folders_where_the_file_system_can(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    (a / "x").write_text("a")
    (b / "x").write_text("b")
    if not maven_fetch.exchange(a, b):
        pytest.skip("no renameat2(RENAME_EXCHANGE) here")
    assert (a / "x").read_text() == "b" and (b / "x").read_text() == "a"
