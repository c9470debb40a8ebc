"""The command line's async pieces (the demo)."""
