"""Writing to the cluster: the one small client every write goes through (kernel)."""
