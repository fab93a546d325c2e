"""Unit tests of `controller`."""
