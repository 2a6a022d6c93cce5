"""Delta Lake and Iceberg tables: a snapshot's files and their per-file adjustments, nothing
more."""
