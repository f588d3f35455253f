"""kvplan.planner."""
