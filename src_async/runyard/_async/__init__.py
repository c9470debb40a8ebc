"""The async twins: hand-written, and the source the sync twins are generated from."""
