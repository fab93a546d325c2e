"""The scheduling face as a service: cluster state → session loop → plan, answered through kube-scheduler's
extender verbs (filter, prioritize, bind with the gang permit cache, preempt)."""
