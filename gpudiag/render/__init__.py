"""Turning runs and findings into text: markdown and JSON (pure), console (rich)."""
