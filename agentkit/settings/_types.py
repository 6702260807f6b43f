"""Small types the settings fields share.

The number rule (docs/architecture.md, "Numbers read from outside"): every number
agentkit reads from settings, files, headers or the wire is finite and in range, or it
is refused with an error naming the field (and the file). The float types below refuse
NaN and the infinities (``inf``, ``1e309``); each field adds its range (``gt``, ``ge``,
``le``) with ``Field``. Integers cannot be NaN or infinite; their fields give a range.
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

MiB = 1024 * 1024
