"""Command checks before run_command starts anything (private).

* ``Settings.command_allow`` / ``command_deny``: prefix lists matched against every simple
  command of the command line (split on ``; && || | & ( )``, newlines, ``$( )`` and
  backticks; leading ``VAR=value`` assignments skipped). An entry without spaces matches
  the first word (or its basename: ``rm`` matches ``/bin/rm``); an entry with spaces
  matches the leading words (``git push`` matches ``git push -f origin``). Deny wins if any
  simple command matches; with an allow list every simple command must match.
  NOT a security boundary: the lists steer a model's habits, they do not stop an
  attacker. ``sh -c '...'``, ``eval``, ``$(...)``, variables (``$X -rf``), ``env``,
  ``xargs``, ``find -exec`` and interpreters (``python -c``) get past a deny list, and
  ``ls "$(...)"`` or ``ls <(...)`` past an allow list (tests/unit/test_shell_policy_limits.py
  records this). Confinement is the command sandbox's job (planned, docs/architecture.md §6).
* Bare interactive programs (editors, pagers, monitors, REPLs and ``ssh`` without a
  command) are refused with a suggestion (docs/tools.md §7 run_command, SWE-agent approach).
"""

from __future__ import annotations

import os
import shlex

from agentkit.errors import ToolError

_SEPARATORS = {";", "&&", "||", "|", "&", "(", ")", "\n", ";;", "|&", "$"}
_EDITORS = {"vim", "vi", "nvim", "nano", "emacs", "pico", "joe", "micro", "mcedit"}
_PAGERS = {"less", "more", "most"}
_MONITORS = {"htop", "btop", "atop", "iotop", "watch", "nmtui", "mc"}
_REPLS = {
    "python", "python3", "python2", "ipython", "node", "deno", "irb", "ghci", "lua",
    "R", "psql", "mysql", "sqlite3", "bash", "sh", "zsh", "fish", "ksh", "php", "perl",
    "ruby", "julia", "scala", "clojure", "erl", "iex",
}  # fmt: skip
_SSH_VALUE_OPTS = set("BbcDEeFIiJLlmOoPpQRSWw")


def split_commands(command: str) -> list[tuple[str, list[str]]]:
    """Split a shell command line into simple commands.

    Returns ``[(operator_before, words), ...]`` where ``operator_before`` is the separator
    that preceded the simple command (``""`` for the first, ``"|"`` for a pipe reader) and
    ``words`` excludes leading ``VAR=value`` assignments. Falls back to whitespace
    splitting when the line cannot be tokenised (unbalanced quotes).
    """
    text = command.replace("`", " ; ")
    try:
        lexer = shlex.shlex(text, posix=True, punctuation_chars=True)
        lexer.whitespace = " \t\r"
        tokens = list(lexer)
    except ValueError:
        tokens = text.replace(";", " ; ").replace("|", " | ").replace("&", " & ").split()
    result: list[tuple[str, list[str]]] = []
    words: list[str] = []
    before = ""
    for token in tokens:
        if token in _SEPARATORS or (token and set(token) <= set(";&|()")):
            if words:
                result.append((before, words))
            words = []
            before = token
            continue
        if not words and "=" in token and token.split("=", 1)[0].isidentifier():
            continue  # FOO=1 cmd
        words.append(token)
    if words:
        result.append((before, words))
    return result


def _matches(entry: str, words: list[str]) -> bool:
    want = entry.split()
    if not want or len(words) < len(want):
        return False
    first = words[0]
    if first != want[0] and os.path.basename(first) != want[0]:
        return False
    return words[1 : len(want)] == want[1:]


def check_policy(command: str, allow: list[str], deny: list[str]) -> None:
    """Raise ToolError("blocked_command") when ``command`` breaks the allow/deny lists.

    A guard against a model's mistakes, not against evasion (see the module doc).
    """
    simple = split_commands(command)
    for _, words in simple:
        for entry in deny:
            if _matches(entry, words):
                raise ToolError(
                    "blocked_command",
                    f"`{' '.join(words)[:120]}` is refused by the deny list (entry {entry!r}); "
                    "do it another way or ask the user",
                )
    if allow:
        for _, words in simple:
            if not any(_matches(entry, words) for entry in allow):
                allowed = ", ".join(allow)
                raise ToolError(
                    "blocked_command",
                    f"`{' '.join(words)[:120]}` is not in the allow list ({allowed}); "
                    "only commands starting with one of these may run",
                )


def _ssh_has_command(args: list[str]) -> bool:
    positional = 0
    skip = False
    for arg in args:
        if skip:
            skip = False
            continue
        if arg.startswith("-") and len(arg) > 1:
            skip = len(arg) == 2 and arg[1] in _SSH_VALUE_OPTS
            continue
        positional += 1
    return positional >= 2


def _top_batch(args: list[str]) -> bool:
    return any(a.startswith("-") and not a.startswith("--") and "b" in a for a in args)


def check_interactive(command: str) -> None:
    """Raise ToolError("blocked_command") for a bare interactive program, with a suggestion."""
    for before, words in split_commands(command):
        name = os.path.basename(words[0])
        args = words[1:]
        piped = before in ("|", "|&")
        hint = ""
        if name in _EDITORS:
            hint = "use read_file, edit_file or write_file to view and change files"
        elif name in _PAGERS and not piped:
            hint = "use read_file, or `cat`/`head`/`sed -n 'a,bp'` for a part of a file"
        elif name in _MONITORS or (name == "top" and not _top_batch(args)):
            hint = "run a one-shot command instead (`ps aux`, `top -b -n 1`, `df -h`)"
        elif name in _REPLS and not piped and all(a in ("-i", "-q") for a in args):
            hint = f"pass a script or code instead, e.g. `{name} -c '...'` or `{name} file`"
            if name in ("node", "deno", "ruby", "perl"):
                hint = f"pass a script or code instead, e.g. `{name} -e '...'` or `{name} file`"
        elif name == "ssh" and not _ssh_has_command(args):
            hint = "give the remote command, e.g. `ssh host 'ls -la'`"
        if hint:
            raise ToolError(
                "blocked_command",
                f"`{' '.join(words)[:80]}` is interactive and would wait for a terminal "
                f"that run_command does not have (stdin is closed); {hint}",
            )
