"""Kubernetes quantities, Volcano-style resource vectors and how a pod's containers add up (kernel)."""

from lapilli.resources.quantity import QuantityError, format_quantity, parse_quantity, to_int, to_milli

__all__ = ["QuantityError", "format_quantity", "parse_quantity", "to_int", "to_milli"]
