"""Builds the C kernels; all other metadata lives in pyproject.toml."""

from setuptools import Extension, setup

# The units of bloomskip._native (paths relative to this file, as setuptools wants them).
NATIVE = "src/bloomskip/_native_src"
UNITS = ["module", "buffers", "batch", "hash", "bits", "tokenizer", "granules", "tsfile_scan"]
HEADERS = ["core", "buffers", "batch", "hash", "bits", "tokenizer", "granules", "tsfile_scan"]

setup(
    ext_modules=[
        Extension(
            "bloomskip._native",
            sources=[f"{NATIVE}/{unit}.c" for unit in UNITS],
            depends=[f"{NATIVE}/{header}.h" for header in HEADERS],
            include_dirs=[NATIVE],
            extra_compile_args=["-O3", "-std=c11", "-Wall", "-Wextra", "-Wno-unused-parameter"],
        )
    ]
)
