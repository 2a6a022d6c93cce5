"""Where bytes live: a local folder or an object-store prefix, behind one small interface.

A :class:`Store` is a root location (a directory, or ``s3://bucket/prefix``, ``gs://…``,
``abfs://…``) holding objects named by ``/``-separated keys relative to it. It offers
exactly what a bloomskip index needs from storage, and counts every request and byte:

* :meth:`Store.list`: every object under a prefix with its identity (size, ETag or version,
  modification time) from the listing alone, so identities never cost a request per object;
* :meth:`Store.get` and :meth:`Store.get_ranges`: whole objects, or byte ranges coalesced the
  way object stores like them (ranges less than :data:`COALESCE_GAP` apart share a request);
* :meth:`Store.put`: an atomic write of an object no one else writes (a new segment);
* :meth:`Store.put_if_absent`: create-only, the primitive a manifest commit is built on — of two
  writers racing for one key exactly one succeeds (``If-None-Match: *`` on object stores, a hard
  link locally);
* :meth:`Store.delete`;
* :meth:`Store.heads`: the identities of some objects now, one request each, in parallel;
  :meth:`Store.identities_now`: the same by the cheaper of those HEADs and one new listing;
* :meth:`Store.opener`: an object opened as listed, for pyarrow to read (its size from the
  listing, so opening costs no request; each read pinned to the listed ETag).

Object stores are reached through ``obstore`` (pyarrow's filesystems have no conditional put and
list no ETags); endpoints and credentials come from the environment as for every AWS, Google and
Azure client (``AWS_ENDPOINT_URL``, ``AWS_ACCESS_KEY_ID``, ``GOOGLE_APPLICATION_CREDENTIALS``,
``AZURE_STORAGE_ACCOUNT_NAME``, …). Data files are read through pyarrow's filesystem for the
same location (:meth:`Store.arrow_filesystem`), except where pyarrow would first ask the store
for the object's size (a ``HEAD``) that the listing already gave: such reads go through
:meth:`Store.opener`. Those are data reads, like pyarrow's, and are not counted in
:attr:`Store.stats`. Every failure is a :class:`StorageError` naming the URI.

Example:
    >>> import tempfile
    >>> store = open_store(tempfile.mkdtemp())
    >>> store.put_if_absent("a/1.json", b"{}"), store.put_if_absent("a/1.json", b"[]")
    (True, False)
    >>> [info.key for info in store.list("a/")], store.get("a/1.json")
    (['a/1.json'], b'{}')
"""

from __future__ import annotations

import os
import re
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from functools import partial
from pathlib import Path
from urllib.parse import urlsplit

from bloomskip._atomic import write_atomically, write_if_absent
from bloomskip.errors import StaleSourceError, StorageError

#: Byte ranges closer than this are read in one request (object_store's own default).
COALESCE_GAP = 1 << 20

#: URI schemes served by an object store (whose data pyarrow's filesystems read too).
OBJECT_SCHEMES = ("s3", "s3a", "gs", "gcs", "abfs", "abfss")
#: Azure spellings obstore knows but pyarrow's filesystem does not: refused with a hint.
_AZURE_ALIASES = ("az", "azure", "adl")

# Generous enough for a slow store, bounded so that an unreachable endpoint is an error in
# seconds rather than object_store's default of minutes of retries.
_CLIENT_OPTIONS = {"connect_timeout": "5s", "timeout": "60s"}
_RETRIES = {"max_retries": 3, "retry_timeout": timedelta(seconds=20)}
#: At most this many metadata requests (:meth:`Store.heads`) are in flight at once.
_HEAD_THREADS = 16


@dataclass(frozen=True)
class ObjectInfo:
    """One object as a listing describes it.

    Attributes:
        key: Its key relative to the store's root, with ``/`` separators.
        size: Its length in bytes.
        mtime_ns: Its modification time, in nanoseconds since the epoch.
        etag: The object store's entity tag (``None`` locally).
        version: The object's version id, where the bucket keeps versions.
        ctime_ns: A local file's status-change time: set by the kernel on every write, rename
            or ``utime``, and never settable by a program (``None`` on an object store).
    """

    key: str
    size: int
    mtime_ns: int
    etag: str | None = None
    version: str | None = None
    ctime_ns: int | None = None

    @property
    def identity(self) -> dict[str, int | str] | None:
        """What tells this object's bytes apart from any other bytes under its name.

        An object store's ETag (and version) with the size; a local file's size, modification
        time and status-change time (a file rewritten with its old size and ``mtime`` restored,
        as ``cp -p`` or ``touch -r`` do, still gets a new ``ctime``). None when the listing
        cannot tell (an object store that returned no ETag): such a file is never pruned.

        Example:
            >>> ObjectInfo("a", 3, 7, etag='"x"').identity
            {'size': 3, 'etag': '"x"'}
        """
        if self.etag is not None:
            identity: dict[str, int | str] = {"size": self.size, "etag": self.etag}
            if self.version is not None:
                identity["version"] = self.version
            return identity
        if self.ctime_ns is not None:
            return {"size": self.size, "mtime_ns": self.mtime_ns, "ctime_ns": self.ctime_ns}
        return None


@dataclass
class IOStats:
    """Requests made and bytes moved through one store, for ``--explain`` and benchmarks."""

    requests: int = 0
    bytes_read: int = 0
    bytes_written: int = 0
    by_kind: dict[str, int] = field(default_factory=dict)

    def count(self, kind: str, requests: int = 1, read: int = 0, written: int = 0) -> None:
        """Record ``requests`` requests of ``kind`` (``list``, ``get``, ``put``, …)."""
        self.requests += requests
        self.bytes_read += read
        self.bytes_written += written
        self.by_kind[kind] = self.by_kind.get(kind, 0) + requests


def coalesce(ranges: list[tuple[int, int]], gap: int = COALESCE_GAP) -> list[tuple[int, int]]:
    """Merge ``(start, length)`` ranges that overlap or lie within ``gap`` bytes of each other.

    Example:
        >>> coalesce([(100, 10), (0, 10), (5000000, 1)], gap=1000)
        [(0, 110), (5000000, 1)]
    """
    merged: list[list[int]] = []
    for start, length in sorted(ranges):
        if merged and start <= merged[-1][1] + gap:
            merged[-1][1] = max(merged[-1][1], start + length)
        else:
            merged.append([start, start + length])
    return [(start, end - start) for start, end in merged]


def is_object_uri(location: str | os.PathLike) -> bool:
    """Whether ``location`` names an object store (``s3://``, ``gs://``, ``abfs://``, …)."""
    return isinstance(location, str) and urlsplit(location).scheme.lower() in (
        *OBJECT_SCHEMES,
        *_AZURE_ALIASES,
    )


def join_key(*parts: str) -> str:
    """Join key parts with single ``/`` separators.

    Example:
        >>> join_key("a/", "/b", "c")
        'a/b/c'
    """
    return "/".join(part.strip("/") for part in parts if part.strip("/"))


class Store(ABC):
    """A root location holding objects by key; see the module docstring."""

    uri: str
    stats: IOStats
    #: Whether a request crosses a network (its round trips are worth overlapping).
    remote: bool = True

    def uri_of(self, key: str) -> str:
        """The full URI (or path) of ``key``, for messages."""
        return f"{self.uri.rstrip('/')}/{key}" if key else self.uri

    @abstractmethod
    def list(self, prefix: str = "") -> list[ObjectInfo]:
        """Every object whose key starts with ``prefix``, in key order, from one listing."""

    def has_prefix(self, prefix: str) -> bool:
        """Whether any object's key starts with ``prefix`` (``"_delta_log/"``), cheaply."""
        return bool(self.list(prefix))

    @abstractmethod
    def get(self, key: str) -> bytes:
        """The whole object ``key``; :class:`StorageError` if it does not exist."""

    def get_ranges(
        self, key: str, ranges: list[tuple[int, int]], gap: int = COALESCE_GAP
    ) -> list[bytes]:
        """The bytes of each ``(start, length)`` range of ``key``, in the order given.

        Ranges fewer than ``gap`` bytes apart are coalesced (:func:`coalesce`) so that nearby
        ones cost one request, and no others. A range past the end of the object comes back
        short: the caller checks lengths.
        """
        merged = coalesce(ranges, gap)
        chunks = self._read_ranges(key, merged)
        out = []
        for start, length in ranges:
            for (merged_start, merged_length), chunk in zip(merged, chunks, strict=True):
                if merged_start <= start and start + length <= merged_start + merged_length:
                    offset = start - merged_start
                    out.append(bytes(chunk[offset : offset + length]))
                    break
        return out

    @abstractmethod
    def put(self, key: str, data: bytes) -> None:
        """Write ``data`` to ``key`` atomically, replacing what is there."""

    @abstractmethod
    def put_if_absent(self, key: str, data: bytes) -> bool:
        """Create ``key`` holding ``data``; ``False`` (nothing written) if it exists already."""

    @abstractmethod
    def delete(self, key: str) -> None:
        """Remove ``key``; a missing key is not an error."""

    @abstractmethod
    def arrow_filesystem(self):
        """``(pyarrow filesystem, base path)`` for reading data files under this root."""

    @abstractmethod
    def _read_ranges(self, key: str, ranges: list[tuple[int, int]]) -> list[bytes]:
        """Read already coalesced ranges, one request each."""

    @abstractmethod
    def _head(self, key: str) -> ObjectInfo | None:
        """One object's identity now, None when it does not exist (one request)."""

    def heads(self, keys: list[str]) -> dict[str, ObjectInfo | None]:
        """Each object's identity as it is now, described as a listing describes it.

        Args:
            keys: The objects.

        Returns:
            ``{key: ObjectInfo}``; None for an object that does not exist.

        Raises:
            StorageError: An object's metadata cannot be read.

        Example:
            >>> store.heads(["a/1.json"])["a/1.json"].size  # doctest: +SKIP
            2
        """
        if len(keys) <= 1 or not self.remote:
            # A local stat takes microseconds: a pool's threads would cost more than they save.
            found = [self._head(key) for key in keys]
        else:
            from concurrent.futures import ThreadPoolExecutor

            # One round trip each: in parallel, a few files' checks cost about one's.
            with ThreadPoolExecutor(max_workers=min(len(keys), _HEAD_THREADS)) as pool:
                found = list(pool.map(self._head, keys))
        self.stats.count("head", len(keys))
        return dict(zip(keys, found, strict=True))

    def identities_now(self, keys: list[str], within: str = "") -> dict[str, ObjectInfo | None]:
        """Each object's identity as it is now, at the fewest requests: one HEAD per key
        (:meth:`heads`), or one new listing of ``within`` where the last one took fewer
        requests (pages) than there are keys, and no more round trips one after another
        than the HEADs take (pages follow one another; HEADs go :data:`_HEAD_THREADS` at a
        time).

        A listing describes each object as the listing its identity came from did (a HEAD
        adds a version id in a versioned bucket, which an S3 listing does not give), and sees
        every write that finished before it started, as a HEAD does.

        Args:
            keys: The objects, under ``within``.
            within: The prefix they were listed under.

        Returns:
            ``{key: ObjectInfo}``; None for an object that does not exist.

        Raises:
            StorageError: The metadata cannot be read.

        Example:
            >>> store.identities_now(["a/1.json"], "a/")["a/1.json"].size  # doctest: +SKIP
            2
        """
        return self.heads(keys)

    def opener(self, info: ObjectInfo) -> Callable[[], ListedObject] | None:
        """How to open object ``info`` for reading as its listing described it, without a
        request (see :class:`ListedObject`); None where a path reads it as cheaply (a local
        file) or where the listing gave no ETag to pin the reads to.

        Example:
            >>> file = store.opener(info)()  # doctest: +SKIP
        """
        return None


class LocalStore(Store):
    """A directory; writes are atomic renames and create-only hard links."""

    remote = False

    def __init__(self, root: str | os.PathLike) -> None:
        self.root = Path(root)
        self.uri = str(self.root)
        self.stats = IOStats()

    def _path(self, key: str) -> Path:
        return self.root / key if key else self.root

    def has_prefix(self, prefix: str) -> bool:
        if prefix.endswith("/"):
            return self._path(prefix.rstrip("/")).is_dir()
        return super().has_prefix(prefix)

    def list(self, prefix: str = "") -> list[ObjectInfo]:
        from bloomskip._walk import walk

        base, _, _ = prefix.rpartition("/")
        top = self._path(base)
        try:
            # Links are followed, as pyarrow.dataset's discovery does; only the directories
            # the prefix can reach are walked.
            found = [
                ObjectInfo(key, stat.st_size, stat.st_mtime_ns, ctime_ns=stat.st_ctime_ns)
                for _, key, stat in walk(
                    str(top),
                    f"{base}/" if base else "",
                    descend=lambda key: prefix.startswith(key + "/") or key.startswith(prefix),
                )
                if key.startswith(prefix)
            ]
        except OSError as exc:
            # A directory that cannot be read would silently drop its files from a dataset.
            raise StorageError(f"cannot list {exc.filename or top}: {exc.strerror or exc}") from exc
        self.stats.count("list")
        return sorted(found, key=lambda item: item.key)

    def get(self, key: str) -> bytes:
        path = self._path(key)
        try:
            data = path.read_bytes()
        except FileNotFoundError as exc:
            raise StorageError(f"{path}: no such file") from exc
        except OSError as exc:
            raise StorageError(f"cannot read {path}: {exc.strerror or exc}") from exc
        self.stats.count("get", read=len(data))
        return data

    def _read_ranges(self, key: str, ranges: list[tuple[int, int]]) -> list[bytes]:
        path = self._path(key)
        try:
            with open(path, "rb") as handle:
                # Never allocate past the file's end, whatever length a (hostile) index asks.
                size = os.fstat(handle.fileno()).st_size
                chunks = [
                    os.pread(handle.fileno(), max(0, min(length, size - start)), start)
                    for start, length in ranges
                ]
        except FileNotFoundError as exc:
            raise StorageError(f"{path}: no such file") from exc
        except OSError as exc:
            raise StorageError(f"cannot read {path}: {exc.strerror or exc}") from exc
        self.stats.count("get", len(ranges), read=sum(map(len, chunks)))
        return chunks

    def put(self, key: str, data: bytes) -> None:
        path = self._path(key)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            write_atomically(path, data)
        except OSError as exc:
            raise StorageError(f"cannot write {path}: {exc.strerror or exc}") from exc
        self.stats.count("put", written=len(data))

    def put_if_absent(self, key: str, data: bytes) -> bool:
        path = self._path(key)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            created = write_if_absent(path, data)
        except OSError as exc:
            raise StorageError(f"cannot write {path}: {exc.strerror or exc}") from exc
        self.stats.count("put", written=len(data) if created else 0)
        return created

    def delete(self, key: str) -> None:
        path = self._path(key)
        try:
            path.unlink(missing_ok=True)
        except OSError as exc:
            raise StorageError(f"cannot delete {path}: {exc.strerror or exc}") from exc
        self.stats.count("delete")

    def arrow_filesystem(self):
        import pyarrow.fs as pafs

        return pafs.LocalFileSystem(), str(self.root)

    def _head(self, key: str) -> ObjectInfo | None:
        path = self._path(key)
        try:
            stat = path.stat()
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise StorageError(f"cannot stat {path}: {exc.strerror or exc}") from exc
        return ObjectInfo(key, stat.st_size, stat.st_mtime_ns, ctime_ns=stat.st_ctime_ns)


class ObjectStore(Store):
    """An object-store prefix (S3, GCS, Azure) reached through ``obstore``."""

    def __init__(self, uri: str) -> None:
        try:
            import obstore
            from obstore.store import from_url
        except ImportError as exc:  # pragma: no cover - obstore is a dependency
            raise StorageError(f"{uri}: reading object storage needs the obstore package") from exc
        self._obstore = obstore
        self.uri = uri.rstrip("/")
        self.stats = IOStats()
        #: Requests (pages) the last listing of each prefix took.
        self._listing_pages: dict[str, int] = {}
        options = dict(_CLIENT_OPTIONS)
        endpoint = os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")
        if endpoint and endpoint.startswith("http://"):
            options["allow_http"] = True  # a local S3-API server; the URL says so, not a flag
        try:
            self._store = from_url(self.uri, client_options=options, retry_config=_RETRIES)
        except Exception as exc:
            raise StorageError(f"{self.uri}: {one_line(exc)}") from exc

    def _fail(self, action: str, key: str, exc: Exception) -> StorageError:
        """The one line of a failed request: the location the user gave and the cause, when
        the store or its bucket is at fault; else the object and the store's reason. The
        client's whole text stays on the chained exception (``bloomskip --debug``)."""
        errors = self._obstore.exceptions
        where = self.uri_of(key)
        text = str(exc)
        code = re.search(r"<Code>([^<]{1,100})</Code>", text)
        message = re.search(r"<Message>([^<]{1,300})</Message>", text)
        if code and code.group(1) in ("NoSuchBucket", "ContainerNotFound"):
            return StorageError(f"{self.uri}: {self._bucket_noun()} does not exist")
        unreachable = _unreachable(text)
        if unreachable is not None:
            return StorageError(f"{self.uri}: cannot reach the object store at {unreachable}")
        reason = f"{code.group(1)}: {message.group(1)}" if code and message else _client_reason(exc)
        if isinstance(exc, errors.NotFoundError | FileNotFoundError) or (
            code and code.group(1) in ("NoSuchBucket", "NoSuchKey")
        ):
            return StorageError(f"{where}: no such object (or bucket) ({reason})")
        denied = isinstance(exc, errors.PermissionDeniedError | errors.UnauthenticatedError) or any(
            marker in text for marker in ("403 Forbidden", "401 Unauthorized", "AccessDenied")
        )
        if denied:
            return StorageError(f"cannot {action} {where}: access denied ({reason})")
        return StorageError(f"cannot {action} {where}: {reason}")

    def _bucket_noun(self) -> str:
        """``bucket 'name'`` (``container 'name'`` on Azure) of this store's URI."""
        parts = urlsplit(self.uri)
        name = parts.netloc.partition("@")[0]
        return f"{'container' if parts.scheme.startswith('abfs') else 'bucket'} {name!r}"

    def list(self, prefix: str = "") -> list[ObjectInfo]:
        found = []
        pages = 0
        # obstore lists whole path segments: list the prefix's directory and filter by
        # characters, as S3's own prefix does.
        directory = prefix.rpartition("/")[0]
        try:
            for page in self._obstore.list(self._store, prefix=directory or None, chunk_size=1000):
                pages += 1
                for meta in page:
                    key = meta["path"]
                    if not key.startswith(prefix):
                        continue  # obstore's prefix is per path segment; ours is per character
                    found.append(
                        ObjectInfo(
                            key,
                            int(meta["size"]),
                            int(meta["last_modified"].timestamp() * 1e9),
                            meta.get("e_tag"),
                            meta.get("version"),
                        )
                    )
        except Exception as exc:
            raise self._fail("list", prefix, exc) from exc
        self.stats.count("list", max(pages, 1))
        self._listing_pages[prefix] = max(pages, 1)
        return sorted(found, key=lambda item: item.key)

    def identities_now(self, keys: list[str], within: str = "") -> dict[str, ObjectInfo | None]:
        pages = self._listing_pages.get(within)
        head_rounds = -(-len(keys) // _HEAD_THREADS)
        if pages is None or pages >= len(keys) or pages > head_rounds:
            return self.heads(keys)
        listed = {info.key: info for info in self.list(within)}
        return {key: listed.get(key) for key in keys}

    def opener(self, info: ObjectInfo) -> Callable[[], ListedObject] | None:
        if info.etag is None:
            return None
        return partial(ListedObject, self, info)

    def read_listed(self, info: ObjectInfo, start: int, end: int) -> bytes:
        """Bytes ``[start, end)`` of object ``info`` as its listing described it: one ranged
        GET sent with ``If-Match`` the listed ETag, which the store refuses once the object is
        another one (the ETag it answers with is compared too).

        Args:
            info: The object as listed (its ETag set).
            start: The first byte.
            end: One past the last byte (at most ``info.size``).

        Returns:
            The bytes (a bytes-like buffer, not copied out of the client's).

        Raises:
            StaleSourceError: The object was replaced or deleted since it was listed.
            StorageError: Any other failure.

        Example:
            >>> store.read_listed(info, info.size - 8, info.size)[-4:]  # doctest: +SKIP
            b'PAR1'
        """
        obstore = self._obstore
        key, etag = info.key, info.etag
        try:
            got = obstore.get(self._store, key, options={"range": (start, end), "if_match": etag})
            data = got.bytes()
        except (obstore.exceptions.PreconditionError, obstore.exceptions.NotFoundError) as exc:
            raise self._listed_changed(info) from exc
        except Exception as exc:
            raise self._fail("read", key, exc) from exc
        answered = got.meta.get("e_tag")
        if answered is not None and answered != etag:
            raise self._listed_changed(info)  # a store that ignored the If-Match
        return data

    def _listed_changed(self, info: ObjectInfo) -> StaleSourceError:
        return StaleSourceError(
            f"{self.uri_of(info.key)}: changed while it was read (it is no longer the object "
            f"listed, ETag {info.etag}); run again"
        )

    def has_prefix(self, prefix: str) -> bool:
        if not prefix.endswith("/"):
            return super().has_prefix(prefix)
        directory = prefix.rstrip("/")
        try:
            # The first page answers it: one request, whatever the number of objects below.
            for page in self._obstore.list(self._store, prefix=directory or None, chunk_size=1):
                self.stats.count("list")
                return any(meta["path"].startswith(prefix) for meta in page)
        except Exception as exc:
            raise self._fail("list", prefix, exc) from exc
        self.stats.count("list")
        return False

    def get(self, key: str) -> bytes:
        try:
            data = bytes(self._obstore.get(self._store, key).bytes())
        except Exception as exc:
            raise self._fail("read", key, exc) from exc
        self.stats.count("get", read=len(data))
        return data

    def _read_ranges(self, key: str, ranges: list[tuple[int, int]]) -> list[bytes]:
        if not ranges:
            return []
        starts = [start for start, _ in ranges]
        ends = [start + length for start, length in ranges]
        try:
            # Coalesced already, as the caller asked: obstore's own merging (1 MiB) would read
            # the gaps between a sliced index's slices.
            chunks = self._obstore.get_ranges(
                self._store, key, starts=starts, ends=ends, coalesce=0
            )
        except Exception as exc:
            raise self._fail("read", key, exc) from exc
        chunks = [bytes(chunk) for chunk in chunks]
        self.stats.count("get", len(ranges), read=sum(map(len, chunks)))
        return chunks

    def put(self, key: str, data: bytes) -> None:
        try:
            self._obstore.put(self._store, key, data)
        except Exception as exc:
            raise self._fail("write", key, exc) from exc
        self.stats.count("put", written=len(data))

    def put_if_absent(self, key: str, data: bytes) -> bool:
        errors = self._obstore.exceptions
        try:
            self._obstore.put(self._store, key, data, mode="create")
        except (errors.AlreadyExistsError, errors.PreconditionError):
            self.stats.count("put")
            return False
        except Exception as exc:
            raise self._fail("write", key, exc) from exc
        self.stats.count("put", written=len(data))
        return True

    def delete(self, key: str) -> None:
        try:
            self._obstore.delete(self._store, key)
        except (self._obstore.exceptions.NotFoundError, FileNotFoundError):
            pass
        except Exception as exc:
            raise self._fail("delete", key, exc) from exc
        self.stats.count("delete")

    def arrow_filesystem(self):
        import pyarrow.fs as pafs

        uri = self.uri
        scheme, _, rest = uri.partition("://")
        if scheme.lower() in ("gs", "gcs"):
            uri = f"gs://{rest}"
        elif scheme.lower() == "s3a":
            uri = f"s3://{rest}"
        try:
            filesystem, path = pafs.FileSystem.from_uri(uri)
        except Exception as exc:
            raise StorageError(f"{self.uri}: {one_line(exc)}") from exc
        return filesystem, path

    def _head(self, key: str) -> ObjectInfo | None:
        errors = self._obstore.exceptions
        try:
            meta = self._obstore.head(self._store, key)
        except (errors.NotFoundError, FileNotFoundError):
            return None
        except Exception as exc:
            raise self._fail("read the metadata of", key, exc) from exc
        return ObjectInfo(
            key,
            int(meta["size"]),
            int(meta["last_modified"].timestamp() * 1e9),
            meta.get("e_tag"),
            meta.get("version"),
        )


class ListedObject:
    """An object read as its listing described it: a read-only, seekable file for pyarrow
    (wrap it in ``pyarrow.PythonFile``).

    pyarrow's S3 reader asks for an object's size (a ``HEAD``) when it opens it; here the
    size is the listed one, so opening costs nothing. Each read is one ranged GET sent with
    ``If-Match`` the listed ETag, which the store refuses once the object is another one (the
    ETag it answers with is compared too): every byte read is of the version listed, so a
    file indexed or decided from these reads is the version its listed identity names.

    Args:
        store: The object's store.
        info: The object as listed (its ETag set).

    Raises:
        StaleSourceError: From a read: the object was replaced or deleted since it was listed.
        StorageError: From a read: any other failure.

    Example:
        >>> import pyarrow.parquet as pq  # doctest: +SKIP
        >>> pq.read_metadata(pa.PythonFile(ListedObject(store, info), mode="r"))  # doctest: +SKIP
    """

    mode = "rb"

    def __init__(self, store: ObjectStore, info: ObjectInfo) -> None:
        self.store = store
        self.info = info
        self.closed = False
        self._position = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def writable(self) -> bool:
        return False

    def tell(self) -> int:
        return self._position

    def seek(self, offset: int, whence: int = os.SEEK_SET) -> int:
        base = {os.SEEK_SET: 0, os.SEEK_CUR: self._position, os.SEEK_END: self.info.size}[whence]
        self._position = max(0, base + offset)
        return self._position

    def read(self, size: int = -1) -> bytes:
        start = self._position
        end = self.info.size if size is None or size < 0 else min(self.info.size, start + size)
        if end <= start:
            return b""
        data = self.store.read_listed(self.info, start, end)
        self._position = start + len(data)
        return data

    def close(self) -> None:
        self.closed = True


def open_store(location: str | os.PathLike) -> Store:
    """Open the store rooted at ``location``: a local path, ``file://…``, or an object-store URI.

    Args:
        location: ``s3://bucket/prefix`` (also ``s3a``), ``gs://…``, ``abfs[s]://…``,
            ``file:///abs/path`` or a plain path.

    Returns:
        A :class:`LocalStore` or an :class:`ObjectStore`.

    Raises:
        StorageError: The URI's scheme is unknown, or the store cannot be configured.

    Example:
        >>> open_store("file:///tmp").uri
        '/tmp'
    """
    if isinstance(location, str) and "://" in location:
        scheme = urlsplit(location).scheme.lower()
        if scheme == "file":
            return LocalStore(urlsplit(location).path)
        if scheme in OBJECT_SCHEMES:
            return ObjectStore(location)
        if scheme in _AZURE_ALIASES:
            raise StorageError(
                f"{location}: write Azure locations as abfs://CONTAINER@ACCOUNT.dfs.core.windows.net"
                "/PATH (the form both the index and pyarrow's data reader understand)"
            )
        raise StorageError(
            f"{location}: unknown scheme {scheme!r} (expected a path, file://, s3://, gs://, "
            "s3a://, abfs:// or abfss://)"
        )
    return LocalStore(location)


#: How the HTTP client words a connection that failed, and the cause a user is told.
_CONNECT_FAILURES = (
    ("connection refused", "connection refused"),
    ("dns error", "host name not found"),
    ("timed out", "timed out"),
    ("certificate", "TLS certificate refused"),
    ("connection reset", "connection reset"),
)


def _unreachable(text: str) -> str | None:
    """``http://host:port (cause)`` when a client's error text says no connection was made
    (refused, unknown host, timed out), else None."""
    lowered = text.lower()
    if "error sending request" not in lowered and "connecterror" not in lowered:
        return None
    endpoint = re.search(r"\b(?:GET|PUT|HEAD|POST|DELETE) (https?://[^/\s?,]+)", text)
    cause = next((said for found, said in _CONNECT_FAILURES if found in lowered), "no connection")
    return f"{endpoint.group(1) if endpoint else 'its endpoint'} ({cause})"


def _client_reason(exc: BaseException) -> str:
    """A client error's own message without the structure dump some clients append."""
    return one_line(str(exc).split("Debug source:", 1)[0])


def one_line(exc: BaseException | str) -> str:
    """An exception's (or a text's) text on one line, at most 300 characters (for a CLI
    error line)."""
    text = " ".join(str(exc).split())
    return text if len(text) <= 300 else text[:297] + "..."
