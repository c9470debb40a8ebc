"""The twin generator: turns the hand-written async sources into their sync twins."""
