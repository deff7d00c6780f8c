"""odradek.re2_syntax: Kafka's regular expressions are RE2/J's; what RE2 refuses is refused here
too, though Python's re accepts it, and RE2 spellings re lacks are translated."""

from __future__ import annotations

import pytest

from odradek.re2_syntax import Re2SyntaxError, compile_re2


@pytest.mark.parametrize("pattern", [
    "(?=a)b", "(?!a)b", "(?<=a)b", "(?<!a)b",  # lookaround
    "(a)\\1", "(?P<n>a)(?P=n)",  # backreferences
    "(?>ab)", "(a)?(?(1)b|c)", "a*+", "a++", "a?+", "a{2}+", "a**", "a???",  # atomic, conditional, possessive, nested
    "a(?#comment)", "a\\Z",  # comments, \Z (RE2 has \z)
    "(", "a)", "[a", "*a",  # refused by both
])
def test_refused(pattern: str) -> None:
    with pytest.raises(Re2SyntaxError):
        compile_re2(pattern)


@pytest.mark.parametrize(("pattern", "text", "matches"), [
    ("txn-.*", "txn-1", True),
    ("txn-.*", "my-txn-1", False),  # the whole id, as RE2/J's Matcher.matches
    ("a*?b", "aab", True),
    ("a??b", "ab", True),
    ("(?<n>ab)+", "abab", True),  # RE2's named group
    ("\\Qa.b\\E", "a.b", True),  # a literal run
    ("\\Qa.b\\E", "axb", False),
    ("ab\\z", "ab", True),
    ("[(?=]+", "(?=", True),  # inside a class nothing is a group
    ("x{2,3}", "xxx", True),
])
def test_accepted(pattern: str, text: str, matches: bool) -> None:
    assert (compile_re2(pattern).fullmatch(text) is not None) == matches
