"""Query engines users already run, pruned by bloomskip indexes (DuckDB SQL)."""
