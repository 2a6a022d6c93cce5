"""Building indexes: granule payloads per file, and the tasks a build runs (threads or Dask)."""
