"""Unit tests of `lapilli.kube`."""
