"""kvplan.report."""
