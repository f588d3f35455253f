"""kvplan.ingest."""
