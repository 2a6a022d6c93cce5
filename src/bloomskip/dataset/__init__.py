"""Skip indexes for Parquet / Arrow IPC datasets: sidecar index, pruning scan, demo.

Importing this package is cheap: pyarrow, DuckDB and the engine load on first use.
"""

from bloomskip.dataset.dataset import BuildReport, Dataset
from bloomskip.dataset.locate import default_sidecar_path

__all__ = ["BuildReport", "Dataset", "default_sidecar_path"]
