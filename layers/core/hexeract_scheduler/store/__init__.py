"""The store contracts (``contract``) and the stores that keep them: in memory (``memory``) and in
one DynamoDB table (``dynamo/``). The worker depends on the contracts only."""
