"""Reports: rows of a sweep, their columns, the renderers, the recommendation, compare and figures."""
