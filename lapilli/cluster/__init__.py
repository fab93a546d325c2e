"""Reading the cluster: list-then-watch reflectors and the cluster state they keep (kernel)."""
