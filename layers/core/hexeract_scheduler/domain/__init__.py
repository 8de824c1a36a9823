"""The domain: what a schedule is, when it fires, where it goes, and the id of each occurrence.

Pure values and rules, no I/O: modules here import nothing of the package but ``errors``.
"""
