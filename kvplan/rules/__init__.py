"""kvplan.rules."""
