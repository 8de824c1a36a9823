"""Example code that consumes hexeract-scheduler messages."""
