"""Unit tests of `webhook`."""
