"""Helpers the tests (and the benchmarks) share: DynamoDB's documented request rules, a
fault-injecting proxy, memory limits, corrupted items, and dynalite, the suite's second DynamoDB."""
