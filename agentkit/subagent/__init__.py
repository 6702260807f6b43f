"""Sub-agents: separate processes running the shared engine on one task each.

Three places (docs/architecture.md §4):

- **the parent side, here**: ``manager`` (the facade: create, terminate, status,
  announce; ``on_started``/``on_finished`` callbacks), ``table`` (the one owner of the
  sub-agents' records, their lock and the condition waiters wait on), ``admission`` (may
  a request start), ``starts`` (a run's start, created or continued: spec extra,
  admission and placement, reservation, the worker started), ``supervisor`` (a monitor
  thread per worker: progress, claims, wrap-up, timeout, finishing once), ``endings``
  (an ended agent's summary, its record made final and its word taken), ``state``
  (``SubAgent``, the parent's view), ``claims`` (write claims), ``record``,
  ``record_folder``, ``finalise`` and ``sweep`` (the record file; the folder around it;
  the parent's final word on it; records a killed process group left running), ``reuse``
  (another conversation's files in a folder, set aside before a start), ``placement``
  (the folders a created sub-agent tries: the seed's default, then its conversation's
  own when another conversation's sub-agent holds the default), ``notify`` (everything
  the main model is told about sub-agents), ``seed_tools`` and ``inputs`` (the main
  agent's three tools and their argument rules), ``results`` (the blocking result's
  shape, get_sub_agent_status's rows); the control plane (docs/control-plane.md):
  ``control`` (questions, usage), ``delivery`` (messages and answers, their receipts),
  ``waits`` (wait_for_sub_agents), ``control_tools`` (its four tools), ``continuation``
  (continue_sub_agent), ``budget`` (token and cost budgets), ``typed_result`` (a
  profile's output_schema); isolation (docs/isolation.md): ``isolated`` (who is
  isolated, the copy made at start and saved at the end), ``merging`` (changes, diff,
  merge, discard, the unmerged list), ``isolation_tools`` (merge_sub_agent and
  discard_sub_agent_changes);
- **in between**: ``contract`` (the status names, ``WorkerSpec``, the pipe messages,
  the ``Launcher`` protocol), ``channel`` (the bounded, typed channel that carries
  them) and ``launchers/`` (local processes, Ray);
- **in the child**: ``worker/`` (the ``Worker``, finish_task and its hooks, its end of
  the link, its tools and sandbox scope, steering and ask_parent, a continued start).

Nothing is imported here: ``import agentkit.subagent.manager`` and the like load
what they need.
"""
