"""Tests of one twin (docs/twins.md says which tree is hand-written and which generated)."""
