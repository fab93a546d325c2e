"""Unit tests of `assembly.dashboard`."""
