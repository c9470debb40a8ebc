"""Test support shared by both twins' tests: servers, proxies, helpers (hand-written once)."""
