"""Unit tests of `extender.service`."""
