"""``command_network = loopback``: a sandboxed command reaches the host's loopback
services, and nothing else, through one Unix socket (agentkit.process.sandbox).

* :mod:`~agentkit.process.loopback.relay`: the per-command relay in the agent (it
  connects only to 127.0.0.1 or ::1 at a port that listened when the command began).
* :mod:`~agentkit.process.loopback.folders`: its private folders, and the sweep of the
  folders a killed agent left.
* :mod:`~agentkit.process.loopback.bridge`: pid 1 of the sandbox: binds the ports
  inside, forks its server, execs the init (run by the agent's Python, ``-I -S``).
* :mod:`~agentkit.process.loopback.ports`: the host's listening TCP ports (netlink).
"""
