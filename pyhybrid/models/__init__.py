"""Bundled model files (the MiniLM tokenizer)."""
