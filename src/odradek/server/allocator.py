"""glibc malloc settings for a broker process.

A request or a follower's fetch response is read into one buffer of the frame's size (up to
``message.max.bytes`` + overhead for a produce, ``replica.fetch.response.max.bytes`` for a
fetch), so a busy broker allocates and frees buffers of about a megabyte hundreds of times a
second. glibc's defaults serve such an allocation from fresh pages every time: above its
dynamic mmap threshold by mmap/munmap, below it from the heap, whose top is trimmed back to the
kernel (brk) as soon as more than twice the threshold is free. Either way every new buffer
page-faults in zeroed pages: measured (bench/partitions_bench.py ``--client flood``, 1 MB
requests of 16 KB batches) as 1.1 s of kernel time per GB produced, more than the writes to the
segments cost.

:func:`tune_malloc` fixes the thresholds (``mallopt``): allocations below ``mmap_threshold``
(16 MB) come from the heap, and the heap keeps up to ``trim_threshold`` (128 MB) of free memory
instead of returning it, so buffers are reused without faults. The price is resident memory
that stays at the broker's peak use of buffers (``queued.max.request.bytes`` bounds the requests'
share when set). A JVM broker makes the same trade through its fixed heap.

Only the broker's own process (``odradek broker``) is tuned; an in-process broker leaves its
host's allocator alone. Settings made through glibc's environment variables
(``MALLOC_MMAP_THRESHOLD_``, ``MALLOC_TRIM_THRESHOLD_``) win. Elsewhere than glibc, nothing
is done.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import os

log = logging.getLogger(__name__)

# mallopt's parameter numbers (glibc's malloc.h)
M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3

MMAP_THRESHOLD = 16 << 20
TRIM_THRESHOLD = 128 << 20

_ENV = {M_TRIM_THRESHOLD: "MALLOC_TRIM_THRESHOLD_", M_MMAP_THRESHOLD: "MALLOC_MMAP_THRESHOLD_"}


def tune_malloc(mmap_threshold: int = MMAP_THRESHOLD, trim_threshold: int = TRIM_THRESHOLD) -> dict[str, int]:
    """Set glibc's mmap and trim thresholds unless the environment sets them; what was set."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        log.debug("no glibc mallopt: the allocator keeps its defaults")
        return {}
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    done: dict[str, int] = {}
    # the trim threshold first: setting either disables glibc's dynamic adjustment of both
    for param, value in ((M_TRIM_THRESHOLD, trim_threshold), (M_MMAP_THRESHOLD, mmap_threshold)):
        name = _ENV[param]
        if name in os.environ:
            continue
        if mallopt(param, value) == 1:
            done[name] = value
        else:
            log.warning("mallopt(%s, %d) refused: the allocator keeps its default", name, value)
    if done:
        log.debug("malloc thresholds set: %s", done)
    return done
