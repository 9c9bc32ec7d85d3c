"""Finding a named trace file on this machine, or downloading it once into the user's cache.

``trace_path(name)`` looks, in order:

1. in the folder ``SERVESIM_DATA_DIR`` names, if set (files under their original names, as
   in ``TRACE_CATALOG``): used as it is, never downloaded into;
2. in the user's cache, ``platformdirs.user_cache_dir("servesim")/traces`` (``$SERVESIM_CACHE_DIR/traces`` when set);
3. else downloads ``NamedTrace.url`` into the cache with pooch (a progress bar on stderr),
   unless ``SERVESIM_OFFLINE`` is set to a non-empty value.

Every file is checked against the catalogue's sha256 before it is read, once per file and
process (hashing all eight files, 8.2 MB, takes about 10 ms). A file in ``SERVESIM_DATA_DIR`` or a
download whose bytes differ raises ``TraceChecksumError``; a stale cache file is downloaded
again. When a file cannot be had (offline, or ``SERVESIM_OFFLINE``), ``TraceUnavailable``
says in one line which URL to fetch and where to put the file. Both are ValueErrors, which
the command line prints as one line with exit status 2. Nothing is downloaded at import.
"""

from __future__ import annotations

import hashlib
import logging
import os
import sys
import time
from pathlib import Path

from workloads.traces.catalog import NamedTrace

DATA_DIR_ENV = "SERVESIM_DATA_DIR"
OFFLINE_ENV = "SERVESIM_OFFLINE"
DOWNLOAD_TIMEOUT_S = 30.0  # per connection attempt and between received bytes (requests' timeout)
CHUNK_BYTES = 65_536

_checked: dict[tuple[Path, int, int], str] = {}  # (path, size, mtime_ns) -> sha256 seen this process


class TraceUnavailable(ValueError):
    """A named trace is not on this machine and cannot be downloaded now."""


class TraceChecksumError(ValueError):
    """A trace file's bytes are not the ones the catalogue names."""


def data_dir() -> Path | None:
    """The folder ``SERVESIM_DATA_DIR`` names, or None when unset or empty."""
    value = os.environ.get(DATA_DIR_ENV, "").strip()
    return Path(value).expanduser() if value else None


def cache_dir() -> Path:
    """Where downloaded traces are kept: ``$SERVESIM_CACHE_DIR/traces``, else ``<user cache>/servesim/traces``
    (platformdirs; the silicon model's derived tables sit beside them, in ``silicon/``)."""
    env = os.environ.get("SERVESIM_CACHE_DIR", "").strip()
    if env:
        return Path(env).expanduser() / "traces"
    import platformdirs

    return Path(platformdirs.user_cache_dir("servesim")) / "traces"


def file_sha256(path: Path) -> str:
    """The sha256 of a file (hex), remembered for this process while its size and mtime stay the same."""
    stat = path.stat()
    key = (path.resolve(), stat.st_size, stat.st_mtime_ns)
    if key not in _checked:
        digest = hashlib.sha256()
        with path.open("rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                digest.update(block)
        _checked[key] = digest.hexdigest()
    return _checked[key]


def local_path(entry: NamedTrace) -> Path | None:
    """The checked local copy of ``entry`` (data folder first, then cache), or None if there is none yet.

    TraceChecksumError for a file in ``SERVESIM_DATA_DIR`` whose sha256 differs; a cache
    file whose sha256 differs counts as absent (it is downloaded again).
    """
    folder = data_dir()
    if folder is not None:
        path = folder / entry.filename
        if path.is_file():
            digest = file_sha256(path)
            if digest != entry.sha256:
                raise TraceChecksumError(
                    f"{path}: sha256 {digest} is not the catalogue's {entry.sha256} for this trace; "
                    f"replace it with {entry.url}"
                )
            return path
    path = cache_dir() / entry.filename
    if path.is_file() and file_sha256(path) == entry.sha256:
        return path
    return None


def trace_path(name: str, entry: NamedTrace) -> Path:
    """The local file of the named trace ``entry``, downloaded into the cache first if need be."""
    return local_path(entry) or download(name, entry)


def unavailable(name: str, url: str, why: str) -> TraceUnavailable:
    return TraceUnavailable(
        f"trace {name!r} is not on this machine and {why}: fetch {url} and put it in {cache_dir()}/ "
        f"(or in the folder {DATA_DIR_ENV} names), or run `servesim workload fetch {name}` when online"
    )


def download(name: str, entry: NamedTrace, url: str | None = None) -> Path:
    """Download ``entry`` (from ``url``, default its canonical URL) into the cache, checking its sha256.

    TraceUnavailable when ``SERVESIM_OFFLINE`` is set or the network fails; TraceChecksumError
    when the bytes received differ from the catalogue's (nothing is kept then).
    """
    url = url or entry.url
    if os.environ.get(OFFLINE_ENV, "").strip():
        raise unavailable(name, url, f"{OFFLINE_ENV} is set")
    import pooch
    import requests

    folder = cache_dir()
    logger = pooch.get_logger()
    level = logger.level
    logger.setLevel(logging.WARNING)  # DownloadProgress says what pooch's INFO line would
    try:
        path = pooch.retrieve(
            url,
            known_hash=f"sha256:{entry.sha256}",
            fname=entry.filename,
            path=folder,
            downloader=pooch.HTTPDownloader(
                progressbar=DownloadProgress(name, url, entry.size_bytes),
                chunk_size=CHUNK_BYTES,
                timeout=DOWNLOAD_TIMEOUT_S,
            ),
        )
    except requests.RequestException as exc:
        status = getattr(exc.response, "status_code", None)
        reason = f"HTTP {status}" if status is not None else type(exc).__name__
        raise unavailable(name, url, f"downloading it failed ({reason})") from None
    except ValueError as exc:
        if "hash" not in str(exc).lower():
            raise
        raise TraceChecksumError(
            f"{url}: the downloaded file's sha256 is not the catalogue's {entry.sha256} for trace {name!r}; "
            "nothing was kept"
        ) from None
    finally:
        logger.setLevel(level)
    return Path(path)


class DownloadProgress:
    """The part of tqdm's interface pooch's downloader uses, drawn on stderr once the server has answered.

    When pooch sets ``total`` (the response was good) one line says what is downloaded from
    where; then tqdm's bar if tqdm is installed, else ``name: done / size bytes`` redrawn in
    place at most every 0.2 s on a terminal (elsewhere only the final count). A download that
    fails before the server answers prints nothing here, so its error stays one line.
    """

    REDRAW_S = 0.2

    def __init__(self, name: str, url: str, size_bytes: int) -> None:
        self.name = name
        self.url = url
        self.expected_bytes = size_bytes
        self.done_bytes = 0
        self._total = 0
        self._bar = None
        self._drawn_at = 0.0
        self._tty = sys.stderr.isatty()

    @property
    def total(self) -> int:
        return self._total

    @total.setter
    def total(self, content_length: int) -> None:
        self._total = content_length
        print(f"servesim: downloading {self.name} ({self.expected_bytes:,} bytes) from {self.url}", file=sys.stderr)
        try:
            from tqdm import tqdm
        except ImportError:
            return
        self._bar = tqdm(total=self.expected_bytes, unit="B", unit_scale=True, desc=self.name, file=sys.stderr)

    def update(self, num_bytes: int) -> None:
        self.done_bytes += num_bytes
        if self._bar is not None:
            self._bar.update(min(num_bytes, self.expected_bytes - self._bar.n))
            return
        now = time.monotonic()
        if self._tty and now - self._drawn_at >= self.REDRAW_S:
            self._drawn_at = now
            self._draw("\r")

    def reset(self) -> None:
        self.done_bytes = 0
        if self._bar is not None:
            self._bar.reset(total=self.expected_bytes)

    def close(self) -> None:
        # pooch closes the bar once every byte is in; it counts whole chunks (and content-length may be
        # the compressed size), so the final count is the file's own size
        self.done_bytes = self.expected_bytes
        if self._bar is not None:
            self._bar.update(self.expected_bytes - self._bar.n)
            self._bar.close()
            return
        self._draw("\r" if self._tty else "")
        sys.stderr.write("\n")
        sys.stderr.flush()

    def _draw(self, start: str) -> None:
        done = min(self.done_bytes, self.expected_bytes)
        sys.stderr.write(f"{start}servesim: {self.name}: {done:,} / {self.expected_bytes:,} bytes")
        sys.stderr.flush()
