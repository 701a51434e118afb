"""Day-2 operation of a deployed pod: returning drained nodes to service, the pod at a glance."""
