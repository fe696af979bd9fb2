"""profsvc."""
