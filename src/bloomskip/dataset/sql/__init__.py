"""ClickHouse WHERE to DuckDB SQL."""
