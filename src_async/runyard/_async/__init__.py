"""The I/O of every part, one package per part (see docs/architecture.md and docs/twins.md)."""
