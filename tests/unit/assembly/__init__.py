"""Unit tests of `assembly`."""
