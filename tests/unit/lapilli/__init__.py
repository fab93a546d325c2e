"""Unit tests of `lapilli`."""
