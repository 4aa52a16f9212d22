"""Click parameter types that the commands share."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import click

__all__ = ["ParamType", "Positive"]

if TYPE_CHECKING:  # generic to type checkers in recent click, not in older ones
    ParamType = click.ParamType[Any]
else:
    ParamType = click.ParamType


class Positive(ParamType):
    """A positive, finite number (``unit`` names it in the messages: "number of seconds")."""

    def __init__(self, name: str = "NUMBER", unit: str = "number") -> None:
        self.name, self.unit = name, unit

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> float:
        if isinstance(value, float):
            return value
        try:
            number = float(value)
        except (TypeError, ValueError):
            self.fail(f"{value!r} is not a {self.unit}", param, ctx)
        if not math.isfinite(number) or number <= 0:
            self.fail(f"must be a positive, finite {self.unit}, not {value}", param, ctx)
        return number
