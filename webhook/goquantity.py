"""A quantity as Go's `resource.Quantity.String()` prints it, for messages that must read as Volcano's do.

Go keeps the format the quantity was written in (a binary suffix such as `Gi`, a decimal exponent such as `1e3`,
or a decimal SI suffix) and prints the value canonically in that format: `1024Mi` reads `1Gi`, `1.5Gi` reads
`1536Mi`, `16000m` reads `16`, `0.5` reads `500m`, `2000` reads `2k`. A binary quantity below 1024 or with a
fraction is printed in decimal SI, as Go does. Values are first rounded up to nano units, as parsing does.
"""

from __future__ import annotations

import math
from enum import Enum
from fractions import Fraction
from typing import Final

from lapilli.resources import parse_quantity

_DECIMAL_SUFFIXES: Final = {-9: "n", -6: "u", -3: "m", 0: "", 3: "k", 6: "M", 9: "G", 12: "T", 15: "P", 18: "E"}
_BINARY_SUFFIXES: Final = ("", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei")


class Format(Enum):
    DECIMAL_SI = "DecimalSI"
    BINARY_SI = "BinarySI"
    DECIMAL_EXPONENT = "DecimalExponent"


def format_of(value: str | int | float) -> Format:
    """The format Go's parser records for the written quantity."""
    text = str(value).strip() if isinstance(value, str) else ""
    if text.endswith("i"):
        return Format.BINARY_SI
    if "e" in text.lstrip("+-").lower() and not text.endswith(("E", "e")):
        return Format.DECIMAL_EXPONENT  # `1e3`; a trailing `E` is the exa suffix
    return Format.DECIMAL_SI


def _decimal_parts(magnitude: Fraction) -> tuple[int, int]:
    """(mantissa, exponent) with the exponent a multiple of 3 in [-9, 18] and no whole group of zeros left."""
    exponent = -9
    mantissa = magnitude * 10**9
    while exponent < 18 and mantissa.denominator == 1 and mantissa.numerator % 1000 == 0:
        mantissa /= 1000
        exponent += 3
    return int(mantissa), exponent


def go_string(value: str | int | float, fmt: Format | None = None) -> str:
    """`Quantity.String()` of a parseable quantity (raises `QuantityError` otherwise)."""
    exact = parse_quantity(value)
    return format_value(exact, fmt or format_of(value))


def format_value(exact: Fraction, fmt: Format) -> str:
    """An exact value printed canonically in the given format."""
    nanos = exact * 10**9
    rounded = Fraction(math.ceil(nanos) if nanos > 0 else -math.ceil(-nanos), 10**9)
    if rounded == 0:
        return "0"
    sign = "-" if rounded < 0 else ""
    magnitude = abs(rounded)
    if fmt is Format.BINARY_SI and magnitude >= 1024 and magnitude.denominator == 1:
        number, power = magnitude.numerator, 0
        while power < len(_BINARY_SUFFIXES) - 1 and number % 1024 == 0:
            number //= 1024
            power += 1
        return f"{sign}{number}{_BINARY_SUFFIXES[power]}"
    mantissa, exponent = _decimal_parts(magnitude)
    if fmt is Format.DECIMAL_EXPONENT:
        return f"{sign}{mantissa}" + (f"e{exponent}" if exponent else "")
    return f"{sign}{mantissa}{_DECIMAL_SUFFIXES[exponent]}"
