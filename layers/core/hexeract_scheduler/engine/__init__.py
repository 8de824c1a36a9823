"""The worker: claim due occurrences, dispatch them, settle each with a fenced ack.

Written against the store contracts and the ``Dispatcher``; never imports a store implementation,
a handler or the command line.
"""
