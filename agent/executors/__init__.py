"""Executors: one per way of running a config (in-process, llama-server, quality)."""
