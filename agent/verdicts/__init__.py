"""Verdicts on a run: throttled, stable, contended."""
