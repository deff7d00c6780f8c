"""``odradek log-dirs adopt-strays``: put stray logs back in service, with the broker stopped.
(``odradek log-dirs describe``, the sizes of a running cluster's partitions, is :mod:`odradek.cli.log_dirs_describe`.)

A broker keeps a log its metadata does not account for as ``<topic>-<partition>.<uuid hex>-stray``
(KIP-858; odradek.log.manager), never loading or deleting it. Once the operator has made the metadata
right again (restored the metadata file, or re-created the topic), this tool renames each stray back
to ``<topic>-<partition>`` so that the next start loads it:

- a partition that has a log again (the re-created topic's) takes the stray's place only when that
  log holds no record (every segment file empty); the empty log is moved aside as a stray itself,
  so nothing is deleted; a log with records is left alone and the stray skipped;
- the stray's ``partition.metadata`` (its old topic id) is renamed ``partition.metadata.adopted-<ms>``
  unless ``--keep-topic-id``: the log then takes the current topic's id at start (a re-created topic
  has a new one); with the id kept, a log whose id differs from the metadata's becomes stray again;
- two strays of one partition are ambiguous: both are skipped (move one aside by hand);
- a stray whose topic or partition the metadata file does not hold is adopted only with ``--force``
  (otherwise the next start marks it stray again).

``--dry-run`` prints what it would do. Exit code 0 when every stray considered was adopted, 1 when
one was skipped, 2 on a usage error.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
import uuid
from pathlib import Path
from typing import Any

STRAY = re.compile(r"^(?P<live>.+-\d+)\.[0-9a-f]{32}-stray$")
METADATA_FILE = "odradek-metadata.json"


def add_parser(sub: Any) -> None:
    from odradek.cli import log_dirs_describe

    p = sub.add_parser("log-dirs", help="log directories: sizes per partition (describe, a running cluster), "
                                        "stray logs back in service (adopt-strays, the broker stopped)")
    lsub = p.add_subparsers(dest="log_dirs_command", required=True)
    log_dirs_describe.add_parser(lsub)
    a = lsub.add_parser("adopt-strays", help="rename stray logs (KIP-858) back into service")
    a.add_argument("--log-dirs", required=True, help="the broker's log.dirs, comma-separated")
    a.add_argument("--topic", help="only the strays of this topic")
    a.add_argument("--keep-topic-id", action="store_true",
                   help="keep each stray's partition.metadata (its old topic id)")
    a.add_argument("--force", action="store_true", help="adopt even what the metadata file does not hold")
    a.add_argument("--dry-run", action="store_true", help="print what would be done, change nothing")
    a.set_defaults(func=run_adopt)


def _partition_counts(dirs: list[Path]) -> dict[str, int] | None:
    """topic -> partition count from the metadata file in the first log dir that has one; None when
    none can be read."""
    from odradek.controller import store_file

    for d in dirs:
        try:  # the snapshot and its journal of changes, read only (nothing repaired here)
            nodes = store_file.MetadataFiles(d / METADATA_FILE).peek()
        except Exception:
            continue
        if nodes is None:
            continue
        out: dict[str, int] = {}
        for path, (data, _version) in nodes.items():
            parts = path.split("/")
            if len(parts) == 4 and parts[1] == "brokers" and parts[2] == "topics" and data:
                try:
                    out[parts[3]] = len(json.loads(data).get("partitions", {}))
                except (ValueError, AttributeError):
                    continue
        return out
    return None


def _holds_records(log_dir: Path) -> bool:
    return any(f.suffix == ".log" and f.stat().st_size > 0 for f in log_dir.iterdir() if f.is_file())


def run_adopt(args: argparse.Namespace) -> int:
    from odradek.fsutil import fsync_dir
    from odradek.log.log import parse_dir_name

    dirs = [Path(d.strip()) for d in args.log_dirs.split(",") if d.strip()]
    missing = [str(d) for d in dirs if not d.is_dir()]
    if not dirs or missing:
        print(f"error: not a directory: {', '.join(missing) or args.log_dirs}", file=sys.stderr)
        return 2
    counts = _partition_counts(dirs)
    if counts is None:
        print("note: no readable metadata file in the log dirs: topics are not checked")
    strays: dict[tuple[Path, str], list[Path]] = {}
    for d in dirs:
        for entry in sorted(d.iterdir()):
            m = STRAY.match(entry.name)
            if m is None or not entry.is_dir():
                continue
            tp = parse_dir_name(m.group("live"))
            if tp is None or (args.topic is not None and tp[0] != args.topic):
                continue
            strays.setdefault((d, m.group("live")), []).append(entry)
    if not strays:
        print("no stray logs found")
        return 0
    skipped = 0
    stamp = int(time.time() * 1000)
    for (d, live_name), found in sorted(strays.items()):
        topic, partition = parse_dir_name(live_name) or ("", -1)
        if len(found) > 1:
            print(f"skip {live_name}: {len(found)} strays of it ({', '.join(f.name for f in found)}); "
                  "move all but one aside by hand")
            skipped += 1
            continue
        stray = found[0]
        if counts is not None and not args.force and partition >= counts.get(topic, 0):
            what = "no topic" if topic not in counts else f"{counts[topic]} partition(s) of topic"
            print(f"skip {stray.name}: the metadata has {what} {topic}; make it right first, or --force")
            skipped += 1
            continue
        live = d / live_name
        actions: list[str] = []
        if live.exists():
            if _holds_records(live):
                print(f"skip {stray.name}: {live_name} holds records; move one of them aside by hand")
                skipped += 1
                continue
            actions.append(f"move the empty log {live_name} aside as {live_name}.{uuid.uuid4().hex}-stray")
        actions.append(f"rename {stray.name} to {live_name}")
        meta = stray / "partition.metadata"
        if meta.exists() and not args.keep_topic_id:
            actions.append(f"rename its partition.metadata to partition.metadata.adopted-{stamp} "
                           "(the log takes the topic's current id at start)")
        print(f"{'would adopt' if args.dry_run else 'adopt'} {stray}: " + "; ".join(actions))
        if args.dry_run:
            continue
        if live.exists():
            os.rename(live, d / actions[0].rsplit(" as ", 1)[1])
        if meta.exists() and not args.keep_topic_id:
            os.rename(meta, stray / f"partition.metadata.adopted-{stamp}")
            fsync_dir(stray)
        os.rename(stray, live)
        fsync_dir(d)
    return 1 if skipped else 0
