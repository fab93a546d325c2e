"""Volcano's HyperNode controller: status.nodeCount of every HyperNode and HyperNodes discovered from node labels."""
