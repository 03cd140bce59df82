"""Telemetry: the sampling thread, series arithmetic, energy, tegrastats log import."""
