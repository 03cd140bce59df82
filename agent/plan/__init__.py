"""Plans: the TOML model, its validation (every problem at once) and its expansion into run specs."""
