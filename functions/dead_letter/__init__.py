"""The dead-letter function (CodeUri of DeadLetterFunction)."""
