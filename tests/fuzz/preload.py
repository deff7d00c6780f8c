"""Imported first by ``run_fuzzer.py`` and ``mutate.py``: with ``ODRADEK_SPEEDUPS_SO=<path>`` the C
extension built at that path becomes ``odradek._speedups`` before any odradek module imports it
(``test_sanitizers.py``: a build with AddressSanitizer and UBSan, their runtime preloaded)."""

from __future__ import annotations

import importlib.util
import os
import sys


def load(path: str) -> None:
    import odradek

    spec = importlib.util.spec_from_file_location("odradek._speedups", path)
    assert spec is not None and spec.loader is not None, path
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    sys.modules["odradek._speedups"] = module
    odradek._speedups = module  # type: ignore[attr-defined]


if os.environ.get("ODRADEK_SPEEDUPS_SO"):
    load(os.environ["ODRADEK_SPEEDUPS_SO"])
