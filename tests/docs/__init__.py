"""The documentation: its snippets run, its generated parts are up to date."""
