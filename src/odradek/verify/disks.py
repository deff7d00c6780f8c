"""Full disks for verification runs: each broker's log dir on its own size-limited tmpfs, which the
``disk-full`` nemesis fills to ENOSPC with a filler file.

Layout for run tag ``T`` (4 hex digits) and broker ``i``::

    <cluster>/broker<i>/disk        a tmpfs (size ``size_mb``) whose source is named odvT-d<i>
    <cluster>/broker<i>/disk/data   the broker's log dir (log.dirs)
    <cluster>/broker<i>/disk/filler the nemesis's filler, written until ENOSPC, removed on heal

Needs root. Each run writes its pid under ``<tmp>/odradek-verify-disks/<tag>`` before it mounts
anything; :func:`cleanup_stale` unmounts the file systems of runs whose pid is gone (a run killed
before its teardown); :meth:`Disks.teardown` copies each log dir to ``broker<i>/data`` (to read
after the run) and unmounts this run's.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

PREFIX = "odv"
OWNERS = Path(tempfile.gettempdir()) / "odradek-verify-disks"  # <tag> holds the pid of the run that mounted
_SOURCE = re.compile(rf"^{PREFIX}([0-9a-f]{{4}})-d\d+$")
CHUNK = 1 << 20


class DiskError(RuntimeError):
    pass


def _run(args: list[str], check: bool = True) -> subprocess.CompletedProcess[str]:
    r = subprocess.run(args, capture_output=True, text=True, timeout=60)
    if check and r.returncode != 0:
        raise DiskError(f"{' '.join(args)}: {r.stderr.strip() or r.returncode}")
    return r


def mounts() -> list[tuple[str, str]]:
    """(source, mount point) of this run's kind of mount (tmpfs named odv<tag>-d<i>)."""
    out = []
    with open("/proc/self/mounts", encoding="utf-8") as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 3 and parts[2] == "tmpfs" and _SOURCE.match(parts[0]):
                out.append((parts[0], parts[1].replace("\\040", " ")))
    return out


def _owner_alive(tag: str) -> bool:
    try:
        pid = int((OWNERS / tag).read_text().strip())
    except (OSError, ValueError):
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _umount(point: str) -> None:
    if _run(["umount", point], check=False).returncode != 0:
        _run(["umount", "-l", point], check=False)  # still busy (a process of a killed run): detach it


def cleanup_stale(log: Callable[[str], None] = print) -> None:
    """Unmount the file systems of runs that died (their owner's pid is gone)."""
    for source, point in mounts():
        m = _SOURCE.match(source)
        assert m is not None
        tag = m.group(1)
        if _owner_alive(tag):
            continue
        _umount(point)
        with contextlib.suppress(OSError):
            (OWNERS / tag).unlink()
        log(f"unmounted the stale file system {source} at {point}")


def fill(path: Path, chunk: int = CHUNK) -> tuple[int, OSError | None]:
    """Write zeros to ``path`` until the file system refuses (down to 4 KiB writes): bytes written and
    the error that stopped it (ENOSPC on a full file system)."""
    written = 0
    block = b"\0" * chunk
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        size = chunk
        while True:
            try:
                written += os.write(fd, block[:size])
            except OSError as e:
                if e.errno == errno.ENOSPC and size > 4096:
                    size //= 16
                    continue
                return written, e
    finally:
        os.close(fd)


@dataclass
class Disks:
    tag: str  # 4 hex digits
    roots: dict[int, Path]  # broker id -> its directory (broker<i>)
    size_mb: int = 96
    log: Callable[[str], None] = print
    mounted: list[Path] = field(default_factory=list)

    def mount_point(self, i: int) -> Path:
        return self.roots[i] / "disk"

    def log_dir(self, i: int) -> Path:
        return self.mount_point(i) / "data"

    def filler(self, i: int) -> Path:
        return self.mount_point(i) / "filler"

    def setup(self) -> None:
        OWNERS.mkdir(exist_ok=True)
        (OWNERS / self.tag).write_text(f"{os.getpid()}\n")
        for i in sorted(self.roots):
            point = self.mount_point(i)
            point.mkdir(parents=True, exist_ok=True)
            _run(["mount", "-t", "tmpfs", "-o", f"size={self.size_mb}m,mode=0755",
                  f"{PREFIX}{self.tag}-d{i}", str(point)])
            self.mounted.append(point)
            self.log_dir(i).mkdir()

    def fill(self, i: int) -> str:
        written, err = fill(self.filler(i))
        st = os.statvfs(self.mount_point(i))
        what = errno.errorcode.get(err.errno or 0, str(err)) if err is not None else "no error"
        return (f"disk-full: broker {i}'s log dir filled: the filler wrote {written / CHUNK:.1f} MiB and got {what}; "
                f"{st.f_bavail * st.f_frsize} bytes left")

    def free(self, i: int) -> None:
        with contextlib.suppress(FileNotFoundError):
            self.filler(i).unlink()

    def teardown(self) -> None:
        for point in self.mounted:
            with contextlib.suppress(OSError):
                (point / "filler").unlink()
            data, keep = point / "data", point.parent / "data"
            with contextlib.suppress(OSError, shutil.Error):
                if data.is_dir():
                    shutil.copytree(data, keep, dirs_exist_ok=True)
            _umount(str(point))
        self.mounted.clear()
        with contextlib.suppress(OSError):
            (OWNERS / self.tag).unlink()
