"""Kubernetes resource quantities with exact arithmetic.

Mirrors `k8s.io/apimachinery/pkg/api/resource.Quantity`: a signed decimal number followed by a binary suffix
(Ki … Ei), a decimal suffix (n, u, m, "", k, M, G, T, P, E) or a decimal exponent (e3, E-2). Values are held as
`fractions.Fraction`, so `0.1 + 0.2` is `3/10` and nothing is lost until a caller asks for milli-units.
"""

from __future__ import annotations

import math
import re
from fractions import Fraction
from typing import Final

_BINARY: Final = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL: Final = {
    "n": Fraction(1, 10**9),
    "u": Fraction(1, 10**6),
    "m": Fraction(1, 10**3),
    "": Fraction(1),
    "k": Fraction(10**3),
    "M": Fraction(10**6),
    "G": Fraction(10**9),
    "T": Fraction(10**12),
    "P": Fraction(10**15),
    "E": Fraction(10**18),
}
_PATTERN: Final = re.compile(
    r"^(?P<sign>[+-]?)(?P<num>[0-9]+(?:\.[0-9]*)?|\.[0-9]+)"
    r"(?:(?P<bin>Ki|Mi|Gi|Ti|Pi|Ei)|(?P<exp>[eE][+-]?[0-9]+)|(?P<dec>[numkMGTPE]?))$"
)


class QuantityError(ValueError):
    """A string that is not a Kubernetes quantity."""


def parse_quantity(value: str | int | float) -> Fraction:
    """Parse a quantity ("500m", "1.5Gi", "2e3", 4) into an exact Fraction of base units."""
    if isinstance(value, bool):
        raise QuantityError(f"quantity must be a string or number, not {value!r}")
    if isinstance(value, int):
        return Fraction(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise QuantityError(f"quantity must be finite, not {value!r}")
        return Fraction(str(value))
    if not isinstance(value, str):
        raise QuantityError(f"quantity must be a string or number, not {type(value).__name__}")
    match = _PATTERN.match(value.strip())
    if match is None:
        raise QuantityError(
            f"{value!r} is not a quantity (expected a number with an optional suffix such as m, Ki, Mi, Gi, k, M, G)"
        )
    number = Fraction(match["num"])
    if match["bin"]:
        number *= _BINARY[match["bin"]]
    elif match["exp"]:
        exponent = int(match["exp"][1:])
        if abs(exponent) > 30:
            raise QuantityError(f"{value!r}: exponent out of range")
        number *= Fraction(10) ** exponent
    else:
        number *= _DECIMAL[match["dec"] or ""]
    return -number if match["sign"] == "-" else number


def to_milli(value: str | int | float) -> int:
    """The quantity in milli-units, rounded up like `Quantity.MilliValue()`."""
    return math.ceil(parse_quantity(value) * 1000)


def to_int(value: str | int | float) -> int:
    """The quantity in whole units, rounded up like `Quantity.Value()`."""
    return math.ceil(parse_quantity(value))


def format_quantity(value: Fraction | int | float, *, binary: bool = False) -> str:
    """Canonical-ish text for a quantity: whole numbers plainly, fractions as milli-units.

    With `binary`, exact multiples of Ki/Mi/Gi/Ti are written with that suffix (for memory).
    """
    q = Fraction(value) if not isinstance(value, Fraction) else value
    if q.denominator == 1:
        n = q.numerator
        if binary and n:
            for suffix in ("Ti", "Gi", "Mi", "Ki"):
                if n % _BINARY[suffix] == 0:
                    return f"{n // _BINARY[suffix]}{suffix}"
        return str(n)
    milli = q * 1000
    if milli.denominator == 1:
        return f"{milli.numerator}m"
    return f"{math.ceil(milli)}m"
