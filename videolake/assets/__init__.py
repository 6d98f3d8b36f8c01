"""Dagster assets of the four tables, their blocking checks, partitions, schedules, sensors and jobs."""
