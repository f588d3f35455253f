"""kvplan.emit."""
