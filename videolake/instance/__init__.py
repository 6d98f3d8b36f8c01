"""The Dagster-instance side of unattended operation: is a run's worker alive, which runs are stale, which pool
slots they hold, and a run launcher that lets Dagster's run monitoring answer those questions on one machine."""
