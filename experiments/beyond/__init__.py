"""Experiments beyond the chapter: what it leaves out, measured the same way."""
