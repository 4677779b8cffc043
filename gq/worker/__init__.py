"""The worker core: the consumer and the rooms one job walks through (docs/architecture.md)."""
