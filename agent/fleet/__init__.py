"""A fleet: many devices, one central database (list, push, export, import)."""
