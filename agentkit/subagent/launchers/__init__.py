"""Choosing how sub-agent workers start, from Settings.

One job: :func:`make_launcher` returns the contract Launcher named by
``Settings.subagent_launcher``: "local" (forkserver processes on this machine,
agentkit.subagent.launchers.local) or "ray" (host actors on a Ray cluster,
agentkit.subagent.launchers.ray, installed by the ``ray`` extra).
"""

from __future__ import annotations

from agentkit.settings import Settings
from agentkit.subagent.contract import Launcher


def make_launcher(settings: Settings) -> Launcher:
    """Return the Launcher for ``settings``.

    Raises RuntimeError when "ray" is chosen but Ray is not installed (the Ray
    launcher joins the cluster on its first start, so a missing cluster fails
    that sub-agent, not the manager).
    """
    if settings.subagent_launcher == "ray":
        try:
            from agentkit.subagent.launchers.ray import RayLauncher
        except ImportError as exc:
            from agentkit.extras import install_hint

            raise RuntimeError(
                f"subagent_launcher = 'ray' needs Ray: {install_hint('ray')}"
            ) from exc
        return RayLauncher(settings)
    from agentkit.subagent.launchers.local import LocalLauncher

    return LocalLauncher(settings.subagent_start_method)
