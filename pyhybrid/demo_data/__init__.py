"""Bundled demo corpus."""
