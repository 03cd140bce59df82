"""The machine a number was measured on: facts, Jetson power state, noise sources, doctor."""
