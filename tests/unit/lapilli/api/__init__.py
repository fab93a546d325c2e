"""Unit tests of `lapilli.api`."""
