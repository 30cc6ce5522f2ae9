"""Maintenance scripts of the fpspec repository (run as modules from the repository root: python3 -m tools.<name>)."""
