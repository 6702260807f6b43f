"""Isolated sub-agents on Ray: no shared storage needed (issue 34, docs/guide/ray.md).

One job: carry an isolated sub-agent's copy (``WorkerSpec.extra["isolation"]``,
agentkit.isolation) to the Ray node that runs it and its work back, as bytes with the
job instead of through a shared disk.

- Driver, at the start (:func:`outbound`): the copy's files as a git bundle
  (agentkit.isolation.bundles.pack_base) and the real deliverables folder as an
  archive (a continued run reads its earlier record there). The shared-workspace check
  does not run for this sub-agent.
- Node (:func:`arrive`): a folder of its own in the node's temp folder holds the copy
  (``copy/``: a repository and its worktree) and a stand-in workspace with the
  deliverables folder (``workspace/<deliverables_dir>``, linked from the copy as on the
  main machine); the spec is rewritten to them (``workspace``, ``deliverables_path``,
  ``extra["isolation"]``: the node-local copy), and the ordinary worker runs on it.
- Node, at the worker's end (:func:`depart`): the work saved and bundled
  (pack_result), the deliverables folder archived; the host hands both back before the
  worker's Result.
- Driver (:func:`bring_back`): the archive unpacked into the real deliverables folder
  (the record's ``isolation`` made the real copy again) and the work imported onto the
  copy's branch and worktree (import_result), before the sub-agent's end is reported.
  The node's folder is removed only once that succeeded; otherwise it is kept and its
  path logged, and the sub-agent's end says so.

The deliverables folder comes back at the end only (not while the sub-agent runs).
"""

from __future__ import annotations

import logging
import shutil
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from agentkit.isolation.archives import pack_folder, unpack_folder
from agentkit.isolation.bundles import import_result, pack_base, pack_result, unpack
from agentkit.isolation.types import Copy, IsolationError
from agentkit.subagent.contract import Result, WorkerSpec

__all__ = [
    "NodeCopy",
    "Outbound",
    "Returned",
    "arrive",
    "bring_back",
    "depart",
    "is_isolated",
    "outbound",
    "with_note",
]

log = logging.getLogger("agentkit")
FOLDER_PREFIX = "agentkit-isolated-"


@dataclass(frozen=True)
class Outbound:
    """What the driver sends with an isolated sub-agent's job: ``bundle`` (the copy's
    files, pack_base) and ``folder`` (the real deliverables folder, a tar archive)."""

    bundle: bytes
    folder: bytes


@dataclass(frozen=True)
class Returned:
    """What the node hands back at the job's end: ``result`` (pack_result's bytes, None
    when the work could not be packed), ``folder`` (the deliverables folder's archive,
    None likewise), ``where`` (the node-local folder, kept until the driver says it has
    both) and ``error`` (why something could not be packed, else None)."""

    result: bytes | None
    folder: bytes | None
    where: str
    error: str | None = None


@dataclass(frozen=True)
class NodeCopy:
    """An isolated job on its node: its own ``folder``, the ``local`` copy in it and the
    ``spec`` the worker runs with."""

    folder: Path
    local: Copy
    spec: WorkerSpec


def is_isolated(spec: WorkerSpec) -> bool:
    """True when ``spec`` is an isolated sub-agent's (``extra["isolation"]`` is a copy)."""
    return isinstance(spec.extra.get("isolation"), dict)


def outbound(spec: WorkerSpec) -> Outbound:
    """On the driver: pack what an isolated sub-agent's node needs. Raises
    IsolationError (the copy is gone, a bundle or archive is over its cap, git failed)."""
    copy = Copy.from_dict(spec.extra["isolation"])
    return Outbound(bundle=pack_base(copy), folder=pack_folder(Path(spec.deliverables_path)))


def arrive(spec: WorkerSpec, carried: Outbound) -> NodeCopy:
    """On the node: unpack the copy and the deliverables folder into a new folder of the
    node's temp folder and return the job with its node spec. On failure the folder is
    removed (nothing was made in it yet) and IsolationError or OSError raised."""
    folder = Path(tempfile.mkdtemp(prefix=FOLDER_PREFIX))
    try:
        from agentkit.isolation import link_deliverables

        copy = Copy.from_dict(spec.extra["isolation"])
        local = unpack(carried.bundle, folder / "copy", copy)
        workspace = folder / "workspace"
        deliverables = workspace / spec.deliverables_dir
        workspace.mkdir()
        unpack_folder(carried.folder, deliverables, root=workspace)
        link_deliverables(local, spec.deliverables_dir, deliverables)
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    extra = {**spec.extra, "isolation": local.to_dict()}
    node_spec = replace(
        spec, workspace=str(workspace), deliverables_path=str(deliverables), extra=extra
    )
    return NodeCopy(folder=folder, local=local, spec=node_spec)


def depart(node: NodeCopy) -> Returned:
    """On the node, once the worker ended: the work (saved and bundled) and the
    deliverables folder (archived). Never raises: what failed is in ``error``."""
    errors: list[str] = []
    result = folder = None
    try:
        result = pack_result(node.local)
    except (IsolationError, OSError) as exc:
        errors.append(f"its work could not be packed: {exc}")
    try:
        folder = pack_folder(Path(node.spec.deliverables_path))
    except (IsolationError, OSError) as exc:
        errors.append(f"its deliverables folder could not be packed: {exc}")
    return Returned(result, folder, str(node.folder), "; ".join(errors) or None)


def bring_back(spec: WorkerSpec, returned: Returned) -> str | None:
    """On the driver: put what the node returned in place (deliverables folder, then the
    work on the copy's branch and worktree). Returns None when all of it is in place,
    else why not (the caller keeps the node's folder and says so)."""
    problems = [returned.error] if returned.error else []
    deliverables, workspace = Path(spec.deliverables_path), Path(spec.workspace)
    if returned.folder is not None:
        root = workspace if deliverables.is_relative_to(workspace) else None
        try:
            unpack_folder(returned.folder, deliverables, root=root)
            _real_copy_in_record(spec, root or deliverables)
        except (IsolationError, OSError) as exc:
            problems.append(f"its deliverables could not be brought back: {exc}")
    if returned.result is not None:
        try:
            import_result(Copy.from_dict(spec.extra["isolation"]), returned.result)
        except (IsolationError, OSError) as exc:
            problems.append(f"its work could not be brought back: {exc}")
    return "; ".join(problems) or None


def _real_copy_in_record(spec: WorkerSpec, root: Path) -> None:
    """The record the node wrote names the node's copy: name the real one."""
    from agentkit.subagent.record import read_record, write_record

    deliverables = Path(spec.deliverables_path)
    record = read_record(deliverables)
    real = spec.extra["isolation"]
    if (
        isinstance(record, dict)
        and record.get("sub_conversation_id") == spec.sub_conversation_id
        and isinstance(record.get("isolation"), dict)
        and record["isolation"] != real
    ):
        record["isolation"] = real
        write_record(deliverables, record, by_parent=True, root=root)


def with_note(spec: WorkerSpec, result: Result | None, why: str, where: str) -> Result | None:
    """Say in the sub-agent's end that its work did not all come back: the Result's
    summary and error, and its record's (``isolation_error``) when the record is here.
    Returns the Result to report (None stays None)."""
    from agentkit.subagent.record import read_record, write_record

    note = f"Its work on the Ray node did not all come back ({why}); it is kept there in {where}."
    deliverables, workspace = Path(spec.deliverables_path), Path(spec.workspace)
    record: dict[str, Any] | None = read_record(deliverables)
    if isinstance(record, dict) and record.get("sub_conversation_id") == spec.sub_conversation_id:
        record["result_summary"] = f"{record.get('result_summary') or ''}\n\n{note}".strip()
        record["isolation_error"] = note
        root = workspace if deliverables.is_relative_to(workspace) else deliverables
        try:
            write_record(deliverables, record, by_parent=True, root=root)
        except OSError as exc:
            log.warning("the record in %s could not say so: %s", deliverables, exc)
    if result is None:
        return None
    error = f"{result.error}; {note}" if result.error else note
    return replace(result, result_summary=f"{result.result_summary}\n\n{note}", error=error)
