"""Data tables profsvc loads at start (installed as the package `profsvc._tables`)."""
