"""The command line's I/O pieces (the demo)."""
