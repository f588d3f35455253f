"""kvplan.runtime."""
