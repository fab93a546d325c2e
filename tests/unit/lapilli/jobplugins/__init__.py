"""Unit tests of `lapilli.jobplugins`."""
