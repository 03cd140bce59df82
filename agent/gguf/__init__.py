"""GGUF files: a bounded reader, what a file says about itself, the memory model, bandwidth, demo models."""
