"""PNG figures for the HTML report."""
