"""The approval rules: which tool calls run, which wait for a person, which are refused.

One job: match a tool call against ``Settings.approvals`` (a JSON object; a profile's
``approvals`` add to it for its sub-agents) and say ``allow``, ``ask`` or ``deny``
(docs/approvals.md §1). Keys:

* a tool name, ``run_command``, ``write_file``, ``mcp__github__create_issue``, or a
  glob over tool names (``mcp__github__*``, ``*``);
* ``<tool>:<glob>``: a glob over the call's subject, for the tools that have one:
  ``run_command`` its command line (``run_command:git push*``), ``read_file``,
  ``write_file`` and ``edit_file`` the path (``write_file:*.env``; matched as spelled and
  as the file it reaches through links, the strictest answer winning), ``extract_webpage``
  the URL, ``web_search`` the query.

The most specific key wins: a subject rule before the exact tool name before a
tool-name glob; among globs, the one with more literal (non-wildcard) characters.
Unlisted calls are ``allow`` (what agentkit did before approvals existed). A command
line is split into its simple commands (at ``;``, ``&&``, ``||``, ``|``, ``&``,
newlines, ``$(``, backticks; leading ``VAR=value`` skipped); each is matched and the
strictest answer wins (``deny`` > ``ask`` > ``allow``), so ``cd x && git push`` asks
where ``git push*`` does. Like ``command_deny`` this steers a model's habits and puts
a person in the loop; it is not a wall (``sh -c``, ``eval``, interpreters get past a
pattern): confinement is the command sandbox's job.

Matching costs a few microseconds per call (benchmarks/approvals.py); with no rules the
session installs no gate at all.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Any, Literal

__all__ = [
    "DECISIONS",
    "SUBJECTS",
    "ApprovalPolicy",
    "Decision",
    "Verdict",
    "check_rules",
    "split_command_line",
]

Decision = Literal["allow", "ask", "deny"]
DECISIONS: tuple[Decision, ...] = ("allow", "ask", "deny")
_STRICTNESS = {"allow": 0, "ask": 1, "deny": 2}

SUBJECTS: dict[str, str] = {
    "run_command": "command",
    "read_file": "path",
    "write_file": "path",
    "edit_file": "path",
    "extract_webpage": "url",
    "web_search": "query",
}
"""The tools whose ``<tool>:<glob>`` keys match an argument, and which argument."""

_WILDCARDS = re.compile(r"[*?\[\]]")
_SHELL_SYNTAX = re.compile(r"[;&|()`$'\"\\\n]")
_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
_TOKENS = re.compile(
    r"""([ \t\r]+)|(&&|\|\||[;&|()\n])|'([^']*)'|"((?:\\.|[^"\\])*)"|\\(.)|([^ \t\r\n;&|()'"\\]+|.)""",
    re.DOTALL,
)


@dataclass(frozen=True)
class Verdict:
    """What the rules say about one call: ``decision``, and ``key`` the rule that said
    it (None: no rule matched, the call is allowed)."""

    decision: Decision
    key: str | None = None


_ALLOW = Verdict("allow")


def _literal(pattern: str) -> int:
    return len(_WILDCARDS.sub("", pattern))


def check_rules(value: Any) -> dict[str, str]:
    """Return ``value`` as approval rules, or raise ValueError naming the bad key.

    ``value``: a mapping of keys (see the module docstring) to ``allow``, ``ask`` or
    ``deny``. Refused: a key that is empty, a ``<tool>:<glob>`` for a tool without a
    subject (:data:`SUBJECTS`) or with an empty glob, a value that is not one of the three.
    """
    if not isinstance(value, Mapping):
        raise ValueError(f"must be a JSON object of rules, got {type(value).__name__}")
    rules: dict[str, str] = {}
    for key, decision in value.items():
        if not isinstance(key, str) or not key.strip():
            raise ValueError(f"key {key!r}: give a tool name, a glob or run_command:<glob>")
        if decision not in DECISIONS:
            raise ValueError(f"key {key!r}: the value must be allow, ask or deny, not {decision!r}")
        tool, colon, pattern = key.partition(":")
        if colon and tool not in SUBJECTS:
            raise ValueError(f"key {key!r}: only {', '.join(SUBJECTS)} take a pattern after ':'")
        if colon and not pattern.strip():
            raise ValueError(f"key {key!r}: the pattern after ':' is empty")
        rules[key] = decision
    return rules


def split_command_line(command: str) -> list[str]:
    """The simple commands of a shell command line, each as its words joined by one
    space (quotes removed, leading ``VAR=value`` assignments skipped), split at ``;``,
    ``&&``, ``||``, ``|``, ``&``, parentheses, newlines, ``$(`` and backticks. Not a shell
    parser: an unbalanced quote is kept as a character."""
    if not _SHELL_SYNTAX.search(command):  # the common case: words only
        plain_words = command.split()
        while plain_words and _ASSIGNMENT.match(plain_words[0]):
            plain_words.pop(0)
        return [" ".join(plain_words or command.split())]
    commands: list[str] = []
    words: list[str] = []
    word: str | None = None
    for match in _TOKENS.finditer(command.replace("`", ";").replace("$(", ";")):
        space, operator, single, double, escaped, plain = match.groups()
        if space is not None or operator is not None:
            if word is not None and (words or not _ASSIGNMENT.match(word)):
                words.append(word)
            word = None
            if operator is not None and words:
                commands.append(" ".join(words))
                words = []
            continue
        piece = single if single is not None else double if double is not None else escaped
        word = (word or "") + (piece if piece is not None else plain)
    if word is not None and (words or not _ASSIGNMENT.match(word)):
        words.append(word)
    if words:
        commands.append(" ".join(words))
    return commands or [" ".join(command.split())]


class ApprovalPolicy:
    """Approval rules, compiled for matching (see the module docstring).

    Args:
        rules: key → ``allow`` | ``ask`` | ``deny``, as :func:`check_rules` accepts
            (raises ValueError otherwise).
    """

    def __init__(self, rules: Mapping[str, str] | None = None) -> None:
        self.rules = check_rules(rules or {})
        self._exact: dict[str, Decision] = {}
        self._globs: list[tuple[str, Decision]] = []
        self._subjects: dict[str, list[tuple[str, Decision]]] = {}
        by_specificity = sorted(self.rules.items(), key=lambda kv: (-_literal(kv[0]), kv[0]))
        for key, decision in by_specificity:
            tool, colon, pattern = key.partition(":")
            value: Decision = decision  # type: ignore[assignment]
            if colon:
                self._subjects.setdefault(tool, []).append((pattern.strip(), value))
            elif _WILDCARDS.search(key):
                self._globs.append((key, value))
            else:
                self._exact[key] = value

    @property
    def empty(self) -> bool:
        """True when there are no rules (every call is allowed)."""
        return not self.rules

    def decide(
        self, tool: str, arguments: Mapping[str, Any] | None, resolved: str | None = None
    ) -> Verdict:
        """Return the verdict on calling ``tool`` with ``arguments`` (the parsed JSON
        object; None or a missing subject: the tool-name rules alone decide).

        ``resolved``: for the path tools, the file the path names after symbolic links,
        workspace-relative (agentkit.tools.paths.resolved_subject); it is matched as well
        as the spelled path and the strictest answer wins, so a link named ``config.txt``
        to ``.env`` meets the ``*.env`` rules."""
        base = self._tool_verdict(tool)
        patterns = self._subjects.get(tool)
        subject = (arguments or {}).get(SUBJECTS.get(tool, "")) if patterns else None
        if not patterns or not isinstance(subject, str):
            return base
        parts = _subject_parts(tool, subject)
        if resolved is not None and SUBJECTS[tool] == "path":
            parts.append(os.path.normpath(resolved.strip() or "."))
        strictest: Verdict | None = None
        for part in parts:
            verdict = next(
                (Verdict(d, f"{tool}:{p}") for p, d in patterns if fnmatchcase(part, p)), base
            )
            if strictest is None or _STRICTNESS[verdict.decision] > _STRICTNESS[strictest.decision]:
                strictest = verdict
        return strictest or base

    def has_path_rules(self, tool: str) -> bool:
        """True when some ``<tool>:<glob>`` key exists for ``tool``."""
        return bool(self._subjects.get(tool))

    def path_verdict(self, tool: str, paths: list[str]) -> Verdict | None:
        """The strictest verdict of ``tool``'s path rules (``read_file:<glob>``...) on any
        of ``paths`` (workspace-relative), or None when no path rule matches one. The
        tool-name rules are not consulted: search_workspace uses this to leave out the
        lines of files that ``read_file`` rules keep from the model."""
        strictest: Verdict | None = None
        for path in paths:
            part = os.path.normpath(path.strip() or ".")
            for pattern, decision in self._subjects.get(tool, ()):
                if fnmatchcase(part, pattern):
                    if strictest is None or _STRICTNESS[decision] > _STRICTNESS[strictest.decision]:
                        strictest = Verdict(decision, f"{tool}:{pattern}")
                    break
        return strictest

    def _tool_verdict(self, tool: str) -> Verdict:
        decision = self._exact.get(tool)
        if decision is not None:
            return Verdict(decision, tool)
        for pattern, found in self._globs:
            if fnmatchcase(tool, pattern):
                return Verdict(found, pattern)
        return _ALLOW


def _subject_parts(tool: str, subject: str) -> list[str]:
    if tool == "run_command":
        return split_command_line(subject)
    if SUBJECTS[tool] == "path":
        text = subject.strip()
        return [os.path.normpath(text) if text else text]
    return [subject.strip()]
