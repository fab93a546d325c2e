"""Explanations for people: `lapilli job why` and the dashboard read the cluster with the user's kubeconfig and
ask the engine's explain module (`extender.engine.explain`) why each PodGroup waits."""
