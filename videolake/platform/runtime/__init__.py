"""How stages run: units and checkpoints on Ray, resources, failure classes, progress, telemetry."""
