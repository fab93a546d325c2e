"""Unit tests of `extender`."""
