"""The dispatcher function (CodeUri of DispatcherFunction)."""
