"""Unit tests of `assembly.dev`."""
