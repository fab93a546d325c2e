"""Unit tests of `lapilli.cluster`."""
