"""What the Lambda functions run: settings read once from the environment, Powertools wiring, the
one composition of a dispatcher (``compose``), the dispatcher's run window and the dead-letter
requests. The handlers in ``functions/`` are a few lines over these modules."""
