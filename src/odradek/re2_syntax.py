"""Regular expressions as Kafka reads them: RE2 syntax (Kafka uses RE2/J, com.google.re2j), run by
Python's ``re``.

RE2 guarantees linear-time matching, so it refuses what needs backtracking; Python's ``re`` accepts
those constructs, and a pattern Kafka refuses with InvalidRegularExpression would otherwise be
accepted here. :func:`compile_re2` refuses them first: backreferences (``\\1``, ``(?P=name)``),
lookahead and lookbehind, atomic groups, conditionals, possessive quantifiers, ``(?#`` comments
and ``\\Z``; and it translates the RE2 spellings Python lacks: ``\\z`` (end of text),
``\\Q...\\E`` (a literal run) and ``(?<name>`` (a named group). Unicode classes (``\\pL``) and
POSIX classes (``[[:alpha:]]``) are not translated: the first are refused by ``re``, the second
read as a plain character set.
"""

from __future__ import annotations

import re

__all__ = ["Re2SyntaxError", "compile_re2"]


class Re2SyntaxError(ValueError):
    """The pattern is not a valid RE2 regular expression."""


_REFUSED_GROUPS = {
    "(?=": "lookahead",
    "(?!": "negative lookahead",
    "(?<=": "lookbehind",
    "(?<!": "negative lookbehind",
    "(?>": "atomic group",
    "(?(": "conditional",
    "(?P=": "backreference",
    "(?#": "comment",
}


def _translate(pattern: str) -> str:
    out: list[str] = []
    i = 0
    n = len(pattern)
    in_class = False
    last_quantifier = False  # the previous token was a repetition operator
    lazy = False  # ... made lazy by a ?
    while i < n:
        c = pattern[i]
        if c == "\\":
            if i + 1 >= n:
                raise Re2SyntaxError("trailing backslash at end of expression")
            e = pattern[i + 1]
            if e == "Q":  # \Q...\E: a literal run
                end = pattern.find("\\E", i + 2)
                lit = pattern[i + 2:] if end < 0 else pattern[i + 2:end]
                out.append(re.escape(lit))
                i = n if end < 0 else end + 2
                last_quantifier = False
                continue
            if e in "123456789" and not (i + 2 < n and pattern[i + 2] in "01234567"):
                raise Re2SyntaxError(f"invalid escape sequence: `\\{e}` (backreferences are not supported)")
            if e == "Z":
                raise Re2SyntaxError("invalid escape sequence: `\\Z`")
            out.append("\\Z" if e == "z" and not in_class else pattern[i:i + 2])
            i += 2
            last_quantifier = False
            continue
        if in_class:
            if c == "]":
                in_class = False
            out.append(c)
            i += 1
            continue
        if c == "[":
            in_class = True
            out.append(c)
            i += 1
            if i < n and pattern[i] == "^":
                out.append("^")
                i += 1
            if i < n and pattern[i] == "]":  # a leading ] is a literal
                out.append("]")
                i += 1
            last_quantifier = False
            continue
        if c == "(" and pattern.startswith("(?", i):
            for prefix, what in _REFUSED_GROUPS.items():
                if pattern.startswith(prefix, i):
                    raise Re2SyntaxError(f"invalid or unsupported Perl syntax: `{prefix}` ({what})")
            if pattern.startswith("(?<", i):  # RE2's (?<name>re) is Python's (?P<name>re)
                out.append("(?P<")
                i += 3
                last_quantifier = False
                continue
        if c in "*+?" or (c == "{" and re.match(r"\{\d+(,\d*)?\}", pattern[i:])):
            if last_quantifier:
                if c == "?" and not lazy:  # x*? is a lazy repetition
                    out.append(c)
                    i += 1
                    lazy = True
                    continue
                raise Re2SyntaxError(f"invalid nested repetition operator: `{pattern[i - 1:i + 1]}`")
            j = pattern.index("}", i) + 1 if c == "{" else i + 1
            out.append(pattern[i:j])
            i = j
            last_quantifier, lazy = True, False
            continue
        out.append(c)
        i += 1
        last_quantifier = False
    return "".join(out)


def compile_re2(pattern: str) -> re.Pattern[str]:
    """``pattern`` compiled for Python's ``re``, or :class:`Re2SyntaxError` when RE2 (or ``re``)
    refuses it. Kafka matches the whole string (RE2/J's ``Matcher.matches``): use ``fullmatch``."""
    translated = _translate(pattern)
    try:
        return re.compile(translated)
    except re.error as e:
        raise Re2SyntaxError(str(e)) from e
