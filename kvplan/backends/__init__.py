"""kvplan.backends."""
