"""The access plan pruning yields, and the one scan that reads it."""
