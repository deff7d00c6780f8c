"""``--add-config``'s argument as kafka-configs.sh reads it: shared by ``odradek configs`` (configs_cmd.py),
its client quotas (quota_configs.py) and its SCRAM credentials written straight into the store
(scram_direct.py), which configs_cmd.py dispatches to; here so that neither imports configs_cmd.py back."""

from __future__ import annotations


def parse_add_config(raw: str) -> dict[str, str]:
    """k=v pairs split on commas outside [brackets]; [a,b] becomes a,b."""
    out: dict[str, str] = {}
    depth = 0
    cur = ""
    items = []
    for ch in raw:
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
        if ch == "," and depth == 0:
            items.append(cur)
            cur = ""
        else:
            cur += ch
    if cur:
        items.append(cur)
    for item in items:
        if "=" not in item:
            raise ValueError(f"--add-config expects k=v pairs, got {item!r}")
        k, v = item.split("=", 1)
        v = v.strip()
        if v.startswith("[") and v.endswith("]"):
            v = v[1:-1]
        out[k.strip()] = v
    return out
