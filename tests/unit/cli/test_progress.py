"""The progress line: stderr only, a terminal's line redrawn in place, a log's lines rate-limited,
nothing at all when neither a terminal nor --progress."""

from __future__ import annotations

import io

from odradek.progress import Progress, enabled


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


class _Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def test_hidden_unless_a_terminal_or_asked() -> None:
    assert not enabled(None, io.StringIO()) and enabled(True, io.StringIO()) and enabled(None, _Tty())
    out = io.StringIO()
    p = Progress("reset offsets", 10, show=False, stream=out)
    p.update(5)
    p.done()
    assert out.getvalue() == ""


def test_a_terminal_line_is_redrawn_in_place() -> None:
    out, clock = _Tty(), _Clock()
    p = Progress("reassignment", 4, show=True, stream=out, clock=clock)
    p.update(1, "3 in progress")
    clock.t += 0.1
    p.update(2)  # within min_interval: not drawn
    clock.t += 0.5
    p.update(3, "1 in progress")
    p.done()
    text = out.getvalue()
    assert text.startswith("\rreassignment: 1/4 (25%), 0.0s, 3 in progress")
    assert "2/4" not in text and "\rreassignment: 3/4 (75%), 0.6s, 1 in progress" in text
    assert text.endswith("\n") and text.count("\n") == 1


def test_a_log_gets_whole_lines_at_most_every_second() -> None:
    out, clock = io.StringIO(), _Clock()
    p = Progress("produce", None, show=True, stream=out, clock=clock)
    for i in range(10):
        p.update(i * 100)
        clock.t += 0.3
    p.done()
    lines = out.getvalue().splitlines()
    assert lines[0] == "produce: 0, 0.0s" and "\r" not in out.getvalue()
    assert lines[1:] == ["produce: 400, 1.2s", "produce: 800, 2.4s", "produce: 900, 3.0s"]  # ≥ 1 s apart, then done
