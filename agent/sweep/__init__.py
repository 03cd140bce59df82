"""A sweep: the loop over a plan's run specs, its lease, fit checks, telemetry hooks and progress."""
