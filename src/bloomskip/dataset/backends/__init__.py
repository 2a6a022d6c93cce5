"""The backends of bloomskip.Dataset: a folder with a sidecar, segments, a table snapshot."""
