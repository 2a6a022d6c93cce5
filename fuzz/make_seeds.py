"""Make the seed corpora of every fuzz target, with the real engines, the way the tests do.

ClickHouse parts come from chdb through the part tests' own builder (``tests/parts/
parts_corpus.py``), TsFiles from PyPI ``tsfile`` through the TsFile tests' builder
(``tests/tsfile/tsfile_corpus.py``), sidecars from ``bloomskip index build`` over the dataset
tests' Parquet files, manifest versions from a segmented build over them, Parquet Bloom
filters from files pyarrow and DuckDB write. Nothing is committed: this script writes
``fuzz/corpus/<target>/`` and the templates some harnesses need (``fuzz/work/``), and run.py
calls it when they are missing.

Usage::

    python fuzz/make_seeds.py [--force]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import sys
import tempfile
from pathlib import Path

FUZZ_DIR = Path(__file__).resolve().parent
ROOT = FUZZ_DIR.parent
CORPUS_DIR = FUZZ_DIR / "corpus"
WORK_DIR = FUZZ_DIR / "work"
#: Seeds above this size slow every mutation down; the engines' small files cover the formats.
MAX_SEED = 256 << 10
#: Parts whose files seed the whole-part target: standalone files, packed archive, Compact.
PART_LAYOUTS = ("wide_plain", "wide_packed", "compact_merged")
GRANULE_PREDICATE = "v = 5 OR hasToken(s, 'w12') OR lc = 'c3' OR has(arr, 20) OR s LIKE '%w2%'"


def _save(target: str, data: bytes) -> bool:
    if not data or len(data) > MAX_SEED:
        return False
    folder = CORPUS_DIR / target
    folder.mkdir(parents=True, exist_ok=True)
    (folder / hashlib.sha1(data).hexdigest()).write_bytes(data)
    return True


def clickhouse_seeds(scratch: Path) -> None:
    """Parts written by chdb: blocks, marks, archives, granules, and whole-part templates."""
    sys.path.insert(0, str(ROOT / "tests" / "parts"))
    from chdb.session import Session
    from parts_corpus import build_corpus

    from bloomskip.clickhouse.marks import MARKS_KINDS
    from bloomskip.clickhouse.part import Part

    data_path = scratch / "chdb"
    session = Session(str(data_path))
    try:
        corpus = build_corpus(session, data_path, scratch)
    finally:
        session.close()
    formats = [(kind, compressed) for kind in MARKS_KINDS for compressed in (False, True)]
    catalogue = []
    for layout, built in sorted(corpus.items()):
        for path in sorted(built.part_dir.iterdir()):
            data = path.read_bytes()
            if path.suffix in (".bin", ".idx", ".cmrk", ".cmrk2", ".cmrk3", ".cmrk4"):
                _save("ch_blocks", b"\x00" + data)
                _save("ch_blocks", b"\x01" + data)
            if path.name == "skp_idx.packed":
                _save("ch_packed", data)
            if ".mrk" in path.suffix:
                compressed = path.suffix.startswith(".cmrk")
                kind = ".mrk" + path.suffix[len(".cmrk" if compressed else ".mrk") :]
                if path.name.startswith("skp_idx") or built.part_type == "Wide":
                    _save("ch_marks", bytes([formats.index((kind, compressed)), 1]) + data)
        part = Part.open(built.part_dir, built.table_sql.read_text())
        for name, definition in part.indexes.items():
            stored = part.read_index(name)
            if stored is None:
                continue
            _save("ch_granules", bytes([len(catalogue)]) + stored.skip_index.to_bytes())
            catalogue.append(
                {
                    "layout": layout,
                    "definition": definition.to_sql(),
                    "column_types": part.column_types,
                    "granule_rows": part.granule_rows.tolist(),
                    "predicate": GRANULE_PREDICATE,
                }
            )
    (WORK_DIR / "granules").mkdir(parents=True, exist_ok=True)
    (WORK_DIR / "granules" / "catalogue.json").write_text(json.dumps(catalogue, indent=1))
    templates = WORK_DIR / "parts"
    templates.mkdir(parents=True, exist_ok=True)
    for number, layout in enumerate(sorted(PART_LAYOUTS)):
        built = corpus[layout]
        shutil.copytree(built.part_dir, templates / layout)
        shutil.copyfile(built.table_sql, templates / f"{layout}.sql")
        for file_number, path in enumerate(sorted((templates / layout).iterdir())):
            _save("ch_part", bytes([number, file_number]) + path.read_bytes())


def tsfile_seeds(scratch: Path) -> None:
    """TsFiles written by PyPI tsfile, and the Bloom filters in their metadata."""
    sys.path.insert(0, str(ROOT / "tests" / "tsfile"))
    from tsfile_corpus import build_corpus

    from bloomskip.errors import BloomskipError
    from bloomskip.tsfile.reader import TsFileReader

    folder = scratch / "tsfile"
    folder.mkdir()
    for corpus_file in build_corpus(folder).values():
        _save("tsfile_reader", corpus_file.path.read_bytes())
        try:
            with TsFileReader(corpus_file.path) as reader:
                bloom = reader.bloom_filter
        except BloomskipError:
            continue
        if bloom is not None:
            _save("tsfile_filter", bloom.to_bytes())


def sidecar_seeds(scratch: Path) -> None:
    """Sidecars written by ``Dataset.build_index`` over the dataset tests' Parquet files."""
    sys.path.insert(0, str(ROOT / "tests" / "dataset"))
    from dataset_fixtures import INDEXES, write_dataset

    from bloomskip.dataset.dataset import Dataset

    for number, (sizes, indexes) in enumerate(
        [([(300, 97), (200, 64)], INDEXES[:3]), ([(500, 500)], INDEXES), ([(50, 10)], INDEXES[:1])]
    ):
        directory = scratch / f"dataset{number}"
        write_dataset(directory, sizes, seed=number)
        sidecar = directory / "_bloomskip.index"
        Dataset(directory, sidecar=sidecar).build_index(indexes, progress=False)
        _save("sidecar", b"\x00" + sidecar.read_bytes())
        _save("sidecar", b"\x01" + sidecar.read_bytes())


def manifest_seeds(scratch: Path) -> None:
    """Manifest versions written by ``LakeDataset.build_index`` over the dataset tests' files,
    and each as a version written before manifests had checksums."""
    sys.path.insert(0, str(ROOT / "tests" / "dataset"))
    from dataset_fixtures import INDEXES, write_dataset

    from bloomskip.dataset.backends.lake import LakeDataset

    directory, index = scratch / "lake", scratch / "lake-index"
    write_dataset(directory, [(300, 97), (200, 64)])
    lake = LakeDataset(directory, index_location=index)
    lake.build_index(INDEXES[:2], progress=False)
    write_dataset(directory, [(300, 97), (200, 64), (50, 10)])
    lake.build_index(INDEXES[:3], progress=False)
    for version in sorted((index / "versions").iterdir()):
        document = json.loads(version.read_bytes())
        for item in [document, *document["segments"]]:
            item.pop("checksum", None)
        for data in (version.read_bytes(), json.dumps(document).encode()):
            _save("manifest", b"\x00" + data)
            _save("manifest", b"\x01" + data)


def sparse_grams_seeds() -> None:
    """Strings for the sparse-grams tokenizer: URLs, UTF-8 of 1 to 4 bytes, invalid bytes,
    LIKE wildcards, runs; the three leading bytes choose the lengths (see fuzz_sparse_grams)."""
    texts = [
        b"https://shop.example/item/4242/view?q=1",
        "Ünïcödé 例え 😊 ok".encode(),
        b"\xc3\x28\xe2\x82\xf0\x9f\x98\x80\xff abc",
        b"%/item/42/_\\%",
        b"a" * 300,
        bytes(range(256)),
    ]
    for number, text in enumerate(texts):
        for lengths in (b"\x00\x61\x00", b"\x01\x05\x03", b"\x09\x28\x07"):
            _save("sparse_grams", lengths + text)
        _save("sparse_grams", bytes([number, number * 7, number * 3]) + text)


def segment_seeds(scratch: Path) -> None:
    """The directory and the bit-sliced parts of the segments ``LakeDataset.build_index``
    writes over the dataset tests' files (every index kind), plain and to be resealed."""
    sys.path.insert(0, str(ROOT / "tests" / "dataset"))
    from dataset_fixtures import INDEXES, write_dataset

    from bloomskip.dataset.backends.lake import LakeDataset

    directory, index = scratch / "lake-sliced", scratch / "lake-sliced-index"
    write_dataset(directory, [(300, 97), (200, 64)])
    lake = LakeDataset(directory, index_location=index)
    lake.build_index(INDEXES, progress=False)
    for segment in lake.latest_manifest().segments:
        data = (index / segment.key).read_bytes()
        offset, length = segment.directory
        _save("segment", b"\x00" + data[offset : offset + length])
        _save("segment", b"\x02" + data[offset : offset + length])
        for offset, length, head, slices_at in segment.index_spans:
            part = data[offset : offset + head] + data[slices_at : slices_at + length - head]
            _save("segment", b"\x01" + part)
            _save("segment", b"\x03" + part)


def parquet_seeds(scratch: Path) -> None:
    """The Bloom filters pyarrow and DuckDB write into Parquet files (header and bitset, as
    stored at each chunk's bloom_filter_offset)."""
    import duckdb
    import pyarrow as pa
    import pyarrow.parquet as pq

    pyarrow_file, duckdb_file = scratch / "sbbf-pyarrow.parquet", scratch / "sbbf-duckdb.parquet"
    table = pa.table({"i": pa.array(range(500)), "s": pa.array([f"s{i}" for i in range(500)])})
    pq.write_table(table, pyarrow_file, bloom_filter_options={"i": True, "s": {"ndv": 10}})
    duckdb.sql(
        "COPY (SELECT 'v' || (i % 50) AS s FROM range(1000) t(i)) "
        f"TO '{duckdb_file}' (FORMAT parquet)"
    )
    for path in (pyarrow_file, duckdb_file):
        metadata = pq.ParquetFile(path).metadata
        data = path.read_bytes()
        for rg in range(metadata.num_row_groups):
            for column in range(metadata.num_columns):
                chunk = metadata.row_group(rg).column(column)
                if chunk.bloom_filter_offset is not None and chunk.bloom_filter_length:
                    start = chunk.bloom_filter_offset
                    _save("parquet_filter", data[start : start + chunk.bloom_filter_length])
    parquet_granule_seeds(pyarrow_file, duckdb_file)


def parquet_granule_seeds(*paths: Path) -> None:
    """Plain parts of parquet_bloom_filter granules harvested from the files' filters (and
    computed for the chunks without one), one part per file and column."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from bloomskip.clickhouse.ddl import parse_index_definition
    from bloomskip.dataset.index.plain_part import encode_part
    from bloomskip.parquet.granules import ParquetBloomGranules, encode_granule
    from bloomskip.parquet.harvest import harvest_open

    for path in paths:
        parquet = pq.ParquetFile(path)
        for column in parquet.schema_arrow.names:
            definition = parse_index_definition(f"{column} TYPE parquet_bloom_filter")
            with pa.OSFile(str(path)) as file:
                found = harvest_open(parquet, file, str(path), [column])
            payload = b"".join(encode_granule(bloom) for bloom in found.filters[column])
            granules = ParquetBloomGranules.from_bytes(
                definition, payload, len(found.filters[column])
            )
            _save("parquet_granules", encode_part(granules))


def main(argv: list[str] | None = None) -> int:
    """Make every corpus (again with --force); returns the exit status."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--force", action="store_true", help="remake existing corpora")
    args = parser.parse_args(argv)
    if args.force:
        shutil.rmtree(CORPUS_DIR, ignore_errors=True)
        shutil.rmtree(WORK_DIR, ignore_errors=True)
    if (WORK_DIR / "done").exists():
        print(f"seeds already made in {CORPUS_DIR} (--force to remake them)")
        return 0
    shutil.rmtree(WORK_DIR, ignore_errors=True)
    WORK_DIR.mkdir(parents=True)
    with tempfile.TemporaryDirectory(prefix="bloomskip-seeds-") as scratch:
        clickhouse_seeds(Path(scratch))
        tsfile_seeds(Path(scratch))
        sidecar_seeds(Path(scratch))
        manifest_seeds(Path(scratch))
        segment_seeds(Path(scratch))
        parquet_seeds(Path(scratch))
        sparse_grams_seeds()
    (WORK_DIR / "done").write_text("")
    for folder in sorted(CORPUS_DIR.iterdir()):
        print(f"{folder.name:16s} {len(list(folder.iterdir())):4d} seeds")
    return 0


if __name__ == "__main__":
    sys.exit(main())
