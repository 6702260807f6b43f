"""agentkit: agents that delegate work to parallel, isolated, observable sub-agents."""

__version__ = "0.1.0"
