"""The isolation engine's pure parts (agentkit.isolation._parse): ref-safe names,
pathspecs, and git's ``-z`` output parsed. No git process runs here."""

from __future__ import annotations

import hashlib
import re

import pytest

from agentkit.isolation import Copy, IsolationError
from agentkit.isolation._parse import (
    blob_id,
    conflict_reason,
    link_leaves,
    parse_batch,
    parse_merge_tree,
    parse_raw_numstat,
    ref_component,
    snapshot_pathspecs,
)
from agentkit.isolation.copies import names

# git's rules for a ref component (git check-ref-format), the ones a name can break.
_BAD = re.compile(r"(^[.-])|\.\.|[\x00-\x20~^:?*\[\\\x7f]|@\{|\.lock$|\.$|/")


@pytest.mark.parametrize(
    "name",
    ["conv-1", "a/b", "../x", "we ird:id~^?*[", "x.lock", "..", "", "ü", "-lead", "a" * 200,
     "trail.", "@{u}", ".hidden", "x.lock.lock"],
)  # fmt: skip
def test_ref_component_is_always_a_valid_ref_component(name: str) -> None:
    safe = ref_component(name)
    assert safe and not _BAD.search(safe) and len(safe) <= 64


def test_ref_component_keeps_a_safe_name_and_separates_changed_ones() -> None:
    assert ref_component("conv-20261207_01.a") == "conv-20261207_01.a"
    assert ref_component("a/b") != ref_component("a-b")
    assert ref_component("a/b") != ref_component("a:b")
    assert ref_component("a/b").startswith("a-b-")


def test_names_of_a_copy() -> None:
    assert names("conv", 3) == (
        "agentkit/conv/agent-3",
        "refs/agentkit/bases/conv/agent-3",
        "conv/agent-3",
    )
    for bad in (-1, True, "3"):
        with pytest.raises(IsolationError):
            names("conv", bad)  # type: ignore[arg-type]


def test_snapshot_pathspecs_cover_the_workspace_and_leave_out_agentkit_folders() -> None:
    assert snapshot_pathspecs("", ()) == [
        ":/",
        ":(top,literal,exclude).agentkit",
        ":(top,glob,exclude)**/.subagent/**",
    ]
    specs = snapshot_pathspecs("pkg/app/", ("sub_agent_results/agent_1/",))
    assert specs[0] == ":(top,literal)pkg/app"
    assert ":(top,literal,exclude)pkg/app/.agentkit" in specs
    assert ":(top,glob,exclude)pkg/app/**/.subagent/**" in specs
    assert specs[-1] == ":(top,literal,exclude)pkg/app/sub_agent_results/agent_1"


def test_snapshot_pathspecs_escape_glob_characters_in_the_prefix() -> None:
    assert ":(top,glob,exclude)a\\[1\\]/**/.subagent/**" in snapshot_pathspecs("a[1]/", ())


def test_parse_raw_numstat() -> None:
    z = "0" * 40
    data = (
        f":000000 100644 {z} {'a' * 40} A\0new file.txt\0"
        f":100644 100755 {'b' * 40} {'b' * 40} M\0run.sh\0"
        f":100644 000000 {'c' * 40} {z} D\0gone\0"
        f":100644 100644 {'d' * 40} {'e' * 40} M\0pic.png\0"
        "3\t0\tnew file.txt\0" + "0\t0\trun.sh\0" + "0\t2\tgone\0" + "-\t-\tpic.png\0"
    ).encode()
    parsed = {c.path: c for c in parse_raw_numstat(data)}
    assert set(parsed) == {"new file.txt", "run.sh", "gone", "pic.png"}
    assert (parsed["new file.txt"].status, parsed["new file.txt"].insertions) == ("A", 3)
    assert (parsed["run.sh"].old_mode, parsed["run.sh"].new_mode) == ("100644", "100755")
    assert parsed["gone"].deletions == 2 and parsed["gone"].new_mode == "000000"
    assert parsed["pic.png"].insertions is None and parsed["pic.png"].deletions is None
    assert parse_raw_numstat(b"") == []


def test_parse_merge_tree_clean_and_with_conflicts() -> None:
    clean = parse_merge_tree(b"f" * 40 + b"\0")
    assert (clean.tree, clean.stages, clean.messages) == ("f" * 40, {}, {})
    data = (
        b"6647856bd5b3aef5d164f8ae172c1013ece9e0f3\0"
        b"100644 de980441c3ab03a8c07dda1ad27b8a11f39deb1e 1\tf\0"
        b"100644 f4ea702d479ef1388dde60e343079a1a9c6eb8d4 2\tf\0"
        b"100644 3b6f40af131104cca3a84e7a760c3c3475377106 3\tf\0"
        b"100644 587be6b4c3f93f93c489c0111bba5596147a26cb 1\tg\0"
        b"100644 206b37888d9b7affbbead76084a0419c3c868078 3\tg\0"
        b"\0"
        b"1\0f\0Auto-merging\0Auto-merging f\n\0"
        b"1\0f\0CONFLICT (contents)\0CONFLICT (content): Merge conflict in f\n\0"
        b"1\0g\0CONFLICT (modify/delete)\0CONFLICT (modify/delete): g deleted in a and "
        b"modified in b.\n\0"
    )
    parsed = parse_merge_tree(data)
    assert parsed.tree == "6647856bd5b3aef5d164f8ae172c1013ece9e0f3"
    assert parsed.stages == {"f": {1, 2, 3}, "g": {1, 3}}
    assert [kind for kind, _ in parsed.messages["f"]] == ["Auto-merging", "CONFLICT (contents)"]
    assert parsed.messages["g"][0][1].startswith("CONFLICT (modify/delete): g deleted")


def test_parse_merge_tree_message_naming_two_paths() -> None:
    data = (
        b"a" * 40
        + b"\0100644 "
        + b"b" * 40
        + b" 2\tx\0\0"
        + b"2\0x\0y\0CONFLICT (rename/rename)\0m\0"
    )
    parsed = parse_merge_tree(data)
    assert parsed.messages == {
        "x": [("CONFLICT (rename/rename)", "m")],
        "y": [("CONFLICT (rename/rename)", "m")],
    }


@pytest.mark.parametrize(
    ("stages", "kinds", "reason"),
    [
        ({1, 2, 3}, ["CONFLICT (contents)"], "both_modified"),
        ({1, 3}, ["CONFLICT (modify/delete)"], "modify_delete"),
        ({1, 2}, [], "modify_delete"),
        ({2, 3}, ["CONFLICT (add/add)"], "both_added"),
        ({2}, ["CONFLICT (file/directory)"], "other"),
        (set(), ["CONFLICT (binary)"], "other"),
    ],
)
def test_conflict_reason(stages: set[int], kinds: list[str], reason: str) -> None:
    assert conflict_reason(stages, kinds) == reason


def test_blob_id_matches_git() -> None:
    # `printf 'hello\n' | git hash-object --stdin`
    assert blob_id(b"hello\n") == "ce013625030ba8dba906f756967f9e9ca394464a"
    assert blob_id(b"", "sha256") == hashlib.sha256(b"blob 0\0").hexdigest()


def test_copy_round_trips_through_its_dict() -> None:
    copy = Copy("worktree", "/w/r", "/w", "/g", "", "agentkit/c/agent-1", "a" * 40,
                "refs/agentkit/bases/c/agent-1", ("sub_agent_results/x",), "t")  # fmt: skip
    assert Copy.from_dict(copy.to_dict()) == copy


@pytest.mark.parametrize(
    ("stderr", "retried"),
    [
        ("fatal: Unable to create '/r/.git/index.lock': File exists.", True),
        ("error: cannot lock ref 'refs/heads/a': Unable to create '/r/.git/refs/heads/a.lock': "
         "File exists.", True),
        ("fatal: failed to read /r/.git/worktrees/agent-4/commondir: Success", True),
        ("fatal: cannot lock ref 'refs/agentkit/bases/c/agent-1': reference already exists", False),
        ("fatal: not a git repository (or any of the parent directories): .git", False),
    ],
)  # fmt: skip
def test_which_git_failures_are_retried(stderr: str, retried: bool) -> None:
    from agentkit.isolation._git import _LOCKED

    assert bool(_LOCKED.search(stderr)) is retried


def test_nested_repositories_without_a_commit_are_named_from_gits_error() -> None:
    from agentkit.isolation.snapshot import _NO_COMMIT

    stderr = (
        "error: 'vendor/x/' does not have a commit checked out\n"
        "error: 'a b/' does not have a commit checked out\nfatal: adding files failed\n"
    )
    assert _NO_COMMIT.findall(stderr) == ["vendor/x", "a b"]


@pytest.mark.parametrize(
    ("path", "target", "leaves"),
    [
        ("pw", "/etc/passwd", True),
        ("pw", "../outside", True),
        ("a/b/up", "../../../x", True),
        ("a/b/up", "../../x", False),
        ("a/link", "b/../../f.txt", False),
        ("a/link", "b/../../../f.txt", True),
        ("link", "f.txt", False),
        ("link", ".", False),
        ("link", "", True),
        ("link", "x" * 4096, True),
    ],
)
def test_a_link_target_leaving_the_workspace_is_told_from_its_text(
    path: str, target: str, leaves: bool
) -> None:
    assert link_leaves(path, target) is leaves


@pytest.mark.parametrize(
    ("path", "target", "links", "leaves"),
    [
        # q -> . makes q/q/.. the top, not a folder below it: the text says inside.
        ("pw", "q/q/q/q/../../../../etc/passwd", {"q": "."}, True),
        ("pw", "q/q/../../f.txt", {"q": "."}, True),
        ("a/pw", "../q/../x", {"q": "."}, True),  # q from the top, then .. above it
        ("pw", "d/../../x", {"d": "a/b"}, False),  # d is a/b: a/b/../.. is the top
        ("pw", "d/../x", {"d": "/tmp"}, True),  # a link on the way points outside
        ("pw", "d/x", {"d": "e", "e": "d"}, True),  # a loop
        ("pw", "d0/x", {f"d{i}": f"d{i + 1}" for i in range(50)}, True),  # too deep
        ("pw", "d0/x", {f"d{i}": f"d{i + 1}" for i in range(30)}, False),
        ("a/b/pw", "../x", {"a": "c/d"}, False),  # the link's own folder is a link
        ("a/b/pw", "../../../x", {"a": "c/d"}, False),  # a -> c/d: c/d/b/../../.. is top
        ("a/b/pw", "../../../../x", {"a": "c/d"}, True),
        ("pw", "q/f.txt", {"q": "."}, False),
    ],
)
def test_a_link_target_is_followed_through_the_links_on_its_way(
    path: str, target: str, links: dict[str, str], leaves: bool
) -> None:
    """A link chain is judged as the kernel follows it (review: ``q -> .`` then
    ``pw -> q/q/q/q/../../../../etc/passwd`` passed a judgement on the text alone)."""
    assert link_leaves(path, target, links.get) is leaves


def test_cat_file_batch_output_is_parsed_and_a_cut_record_ends_it() -> None:
    data = b"aaa blob 11\n/etc/passwd\nbbb missing\nccc blob 5\nf.txt\nddd blob 9\nshort"
    assert parse_batch(data) == {"aaa": "/etc/passwd", "ccc": "f.txt"}
