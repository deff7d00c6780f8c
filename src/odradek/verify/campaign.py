"""``odradek verify campaign``: many verification runs in a row, cycling through the fault families
with a new seed each, and a summary of what each found (``summary.md`` and ``summary.jsonl`` in the
campaign's directory; each run keeps its own directory, ``run-<n>-<families>-seed<seed>``)."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path

from odradek.verify import runner

# each run's fault families, in turn: every family alone, then combinations
MIXES: tuple[tuple[str, ...], ...] = (
    ("kill",), ("pause",), ("kill2",), ("kill-controller",), ("partition",), ("one-way",), ("bridge",), ("isolate",), ("zookeeper",),
    ("disk-full",), ("clock",),
    ("kill", "pause"), ("partition", "kill"), ("bridge", "pause", "zookeeper"), ("disk-full", "clock"), ("clock", "partition", "kill"),
    ("kill", "kill2", "kill-controller", "pause", "partition", "one-way", "bridge", "isolate", "zookeeper", "disk-full", "clock"),
)


def mixes_of(families: tuple[str, ...]) -> tuple[tuple[str, ...], ...]:
    """The mixes of a campaign restricted to ``families``: each alone, then all together."""
    if not families:
        return MIXES
    alone = tuple((f,) for f in families)
    return alone + ((families,) if len(families) > 1 else ())


@dataclass
class CampaignConfig:
    runs: int
    duration_s: float
    seed: int
    out: Path
    mixes: tuple[tuple[str, ...], ...] = MIXES


def run(cfg: CampaignConfig) -> int:
    """Exit 0 when every run's history was valid, 1 when one showed an anomaly, 2 when a run failed."""
    cfg.out.mkdir(parents=True, exist_ok=True)
    worst = 0
    rows: list[str] = ["| run | faults | seed | result | seconds |", "| --- | --- | --- | --- | --- |"]
    with open(cfg.out / "summary.jsonl", "a", encoding="utf-8") as summary:
        for n in range(cfg.runs):
            families = cfg.mixes[n % len(cfg.mixes)]
            seed = cfg.seed + n
            out = cfg.out / f"run-{n:03d}-{'+'.join(families)}-seed{seed}"
            t0 = time.monotonic()
            code = runner.run(runner.RunConfig(cfg.duration_s, families, seed, out))
            took = time.monotonic() - t0
            report = (out / "report.txt").read_text().splitlines() if (out / "report.txt").exists() else []
            result = {0: "valid", 1: "ANOMALIES", 2: "run failed"}.get(code, str(code))
            anomalies = [line for line in report[1:] if line and not line.startswith(" ")]
            summary.write(json.dumps({"run": n, "families": families, "seed": seed, "exit": code,
                                      "anomalies": anomalies, "seconds": round(took, 1), "dir": str(out)}) + "\n")
            summary.flush()
            rows.append(f"| {n} | {'+'.join(families)} | {seed} | {result}{': ' + ', '.join(anomalies) if anomalies else ''}"
                        f" | {took:.0f} |")
            (cfg.out / "summary.md").write_text("\n".join(rows) + "\n")
            print(f"campaign: run {n + 1}/{cfg.runs} {'+'.join(families)} seed {seed}: {result}", flush=True)
            worst = max(worst, code)
    return worst
