"""kvplan.cli."""
