"""Where an index lives, and its on-disk layouts (the single-file sidecar, segments)."""
