"""Unit tests of `assembly.sim`."""
