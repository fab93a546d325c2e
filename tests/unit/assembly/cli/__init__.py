"""Unit tests of `assembly.cli`."""
