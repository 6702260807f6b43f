"""``command_network = loopback``: a sandboxed command reaches the host's loopback
services, and nothing else, through one Unix socket (agentkit.process.sandbox).

* :mod:`~agentkit.process.loopback.relay`: the per-command relay in the agent (it
  connects only to 127.0.0.1 or ::1 at a port that listened when the command began).
* :mod:`~agentkit.process.loopback.folders`: its private folders, and the sweep of the
  folders a killed agent left.
* :mod:`~agentkit.process.loopback.bridge`: pid 1 of the sandbox: binds the ports
  inside, forks its server, execs the init (run by the agent's Python, ``-I -S``).
* :mod:`~agentkit.process.loopback.ports`: the host's listening TCP ports (netlink).

How it works: bubblewrap alone cannot filter by address, so, as mature sandboxes do (a
proxy bridged into the network namespace through a Unix socket), the namespace stays
private (``--unshare-net``: only its own ``lo``, no route out, so any other address
fails at once with "Network is unreachable") and a Unix socket is the one way out. In
the agent, :mod:`agentkit.process.loopback.relay` serves that socket for this command
alone, from a private 0700 folder (:mod:`agentkit.process.loopback.folders`): a header
line names a port, and it connects only to ``127.0.0.1`` (or ``::1``) at that port. The
folder is bind-mounted read-only at ``/run/agentkit-loopback`` (under the hidden
``/run``), and the sandbox starts with :mod:`agentkit.process.loopback.bridge` (the
agent's Python, ``-I -S``, from a copy in that folder) as pid 1: it binds
``127.0.0.1:P`` (and ``[::1]:P``) inside for every port ``P`` listening on the host's
loopback or wildcard addresses when the command is launched
(:mod:`agentkit.process.loopback.ports`; at most 1024), forks its server and execs the
usual init, so the ports are bound before the command runs and the server dies with the
namespace. Enforced by the relay, whatever the command writes to its socket: the header
must be the canonical decimal of one of exactly those ports (a service started after the
command began is unreachable); at most 64 connections at once (16 awaiting a header, the
rest queued); when the command ends (run_command closes the relay; a namespace kept for
background services closes it when it ends) every connection is closed on both sides,
its thread ends and its folder goes.

Limits: TCP only (no UDP, no Unix sockets of the host); a bridged port is taken inside
(the command's own server cannot bind it there); the command can reach *every* TCP
service listening on the host's loopback when it started, including ones without
authentication, whoever runs them. Cost (docs/guide/security.md, ``python
benchmarks/sandbox.py``): about 11 ms a command, mostly the bridge's Python start; the
ports come from a netlink dump (0.1 ms).
"""
