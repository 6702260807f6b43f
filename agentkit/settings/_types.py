"""Small types the settings fields share.

The number rule (docs/architecture.md, "Numbers read from outside"): every number
agentkit reads from settings, files, headers or the wire is finite and in range, or it
is refused with an error naming the field (and the file). The float types below refuse
NaN and the infinities (``inf``, ``1e309``); each field adds its range (``gt``, ``ge``,
``le``) with ``Field``. Integers cannot be NaN or infinite; their fields give a range,
upper bound included: a field's own where it has a natural one (sub-agents at once,
redirects), else one of the ``MAX_*`` bounds below, far above any real use, so that a
typing slip (``100000000000000000000``) is refused at the start instead of overflowing
what the operating system takes or waiting forever later.
"""

from __future__ import annotations

from typing import Annotated

from annotated_types import Ge, Gt, Le
from pydantic import AllowInfNan
from pydantic_settings import NoDecode

__all__ = [
    "CommaList",
    "FiniteFloat",
    "MiB",
    "NonNegativeFloat",
    "NonNegativeInt",
    "PositiveFloat",
    "PositiveInt",
    "Seconds",
    "NonNegativeSeconds",
    "MAX_SECONDS",
    "MAX_WHOLE_SECONDS",
    "MAX_COUNT",
    "MAX_CHARS",
    "MAX_BYTES",
    "MAX_TOKENS",
    "MAX_MIB",
]

CommaList = Annotated[list[str], NoDecode]
"""A list field that the environment gives as a comma-separated string."""

FiniteFloat = Annotated[float, AllowInfNan(False)]
"""A float that is neither NaN nor infinite (any sign)."""

PositiveFloat = Annotated[float, AllowInfNan(False), Gt(0)]
"""A finite float above 0."""

NonNegativeFloat = Annotated[float, AllowInfNan(False), Ge(0)]
"""A finite float, 0 or above."""

PositiveInt = Annotated[int, Ge(1)]
"""A whole number, 1 or above."""

NonNegativeInt = Annotated[int, Ge(0)]
"""A whole number, 0 or above."""

MAX_SECONDS = 1e9
"""The longest duration a setting or file may give, seconds (about 31 years): past it a
deadline overflows what the operating system's waits take. Longer means no limit in
practice; say so with the field's own "no limit" value where it has one."""

Seconds = Annotated[float, AllowInfNan(False), Gt(0), Le(MAX_SECONDS)]
"""A duration: finite, above 0, at most :data:`MAX_SECONDS`."""

NonNegativeSeconds = Annotated[float, AllowInfNan(False), Ge(0), Le(MAX_SECONDS)]
"""A delay: finite, 0 or above, at most :data:`MAX_SECONDS`."""

MAX_WHOLE_SECONDS = int(MAX_SECONDS)
"""The largest duration a whole-seconds setting may give (``subagent_timeout_*``)."""

MAX_COUNT = 1_000_000
"""The largest count of steps or entries a setting may give (turns, list entries, lines)."""

MAX_CHARS = 100_000_000
"""The largest cap on a text a setting may give, characters (100 million)."""

MiB = 1024 * 1024

MAX_BYTES = 1 << 40
"""The largest size a setting may give, bytes (1 TiB)."""

MAX_MIB = 1 << 30
"""The largest memory a setting may give in MiB (1 PiB)."""

MAX_TOKENS = 10**12
"""The largest token count or budget a setting may give (a million million)."""
