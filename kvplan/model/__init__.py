"""Pydantic types only, no I/O."""
