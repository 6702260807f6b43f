"""Small types the settings fields share."""

from __future__ import annotations

from typing import Annotated

from pydantic_settings import NoDecode

__all__ = ["CommaList", "MiB"]

CommaList = Annotated[list[str], NoDecode]
"""A list field that the environment gives as a comma-separated string."""

MiB = 1024 * 1024
