"""The one-command local demo (``make demo``): see ``demo/run.py``."""
