"""Renderers: a Report as text for people, JSON for machines, Markdown for bug reports."""
