"""Starting programs that cannot outlive the agent, cannot take the machine and, sandboxed,
cannot escape it.

The map (each module's docstring argues its design in full):

* :mod:`~agentkit.process.tree`: process marks (``AGENT_MARK_VAR``), finding and
  killing a process tree, waiting until it is gone.
* :mod:`~agentkit.process.secrets`: which environment variables are secrets, and the
  scrubbed environment every started program gets.
* :mod:`~agentkit.process.redact`: the process's known secrets (the endpoint's key,
  the environment's secret values, ``OTEL_EXPORTER_OTLP_HEADERS``), scrubbed out of
  every error text where the error is made (LLMError, ToolError, MCP failures).
* :mod:`~agentkit.process.spawn`: the pid-namespace launch (``setpriv --pdeathsig KILL
  -- unshare --pid --fork --kill-child``, or bubblewrap's ``--die-with-parent``), its
  init and control socket, one spawner thread (:mod:`~agentkit.process.spawner`) so the
  parent-death signal means "the agent process ended"; the marks fallback where namespaces are missing. Commands, MCP
  servers and the local model server all start through it (``owned_argv``, the one
  spelling of that argv; ``start_owned``).
* :mod:`~agentkit.process.sandbox`: the bubblewrap sandbox of run_command (what a
  command may see, write and reach), with :mod:`~agentkit.process.sandbox_folders`
  (which folders are hidden or shown) and :mod:`~agentkit.process.sandbox_notes`
  (the refusal notes a model reads).
* :mod:`~agentkit.process.limits`: what a command may use (``command_max_processes``,
  ``command_max_memory_mb``, ``command_cpu_weight``): a cgroup per command where the
  agent may create one (:mod:`~agentkit.process.cgroups`: where, entering, removal),
  else ``prlimit`` inside the command's user namespace; the one log line saying what
  is in force, and the notes naming a limit a command hit.
* :mod:`~agentkit.process.pipes`: whether the reader of a pipe this process writes
  to (``| head``, an editor) has gone, seen without writing.
* :mod:`~agentkit.process.mp_tempdir`: multiprocessing's temp folder (the worker
  server's socket), named by its owner's pid so that the next start sweeps one a
  SIGKILL left.
* :mod:`~agentkit.process.loopback`: ``command_network = loopback``: the per-command
  relay in the agent, its folders, the bridge inside the sandbox and the host's
  listening ports.

Nothing outside this package imports a private (``_``) module of it.
"""
