"""The Redis boundary: keys, clients and one typed method per Lua script (docs/architecture.md)."""
