"""Named traces on demand: found in SERVESIM_DATA_DIR or the cache, else downloaded and checked, or refused in one line.

Downloads come from a local HTTP server on 127.0.0.1 serving copies of the test data
folder's files under GitHub's raw-file layout; nothing here reaches the network.
"""

from __future__ import annotations

import functools
import hashlib
import http.server
import shutil
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from servesim.cli import main
from tests.conftest import missing_trace, require_trace
from workloads.traces import TRACE_CATALOG, catalog, read_trace, resolve_source
from workloads.traces.fetch import (
    TraceChecksumError,
    TraceUnavailable,
    data_dir,
    download,
    local_path,
    trace_path,
)

SMALL = ("agent-rounds", "azure-code")  # 33 KB and 320 KB
SESSION_DATA_DIR = data_dir()  # as tests/conftest.py set it, before a test empties it


def _cli(capsys, *args) -> tuple[int, str, str]:
    code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    """An empty cache and an empty SERVESIM_DATA_DIR; downloads allowed (from 127.0.0.1 only: see ``server``)."""
    monkeypatch.setenv("SERVESIM_CACHE_DIR", str(tmp_path / "cache"))
    (tmp_path / "empty").mkdir()
    monkeypatch.setenv("SERVESIM_DATA_DIR", str(tmp_path / "empty"))
    monkeypatch.delenv("SERVESIM_OFFLINE", raising=False)
    monkeypatch.setattr(catalog, "RAW_FILES_URL", f"http://127.0.0.1:{closed_port()}")  # refused, never out
    folder = tmp_path / "cache" / "traces"
    assert local_cache_dir() == folder
    return folder


def closed_port() -> int:
    """A loopback port nothing listens on: bound by the system, then released."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def local_cache_dir() -> Path:
    from workloads.traces.fetch import cache_dir

    return cache_dir()


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args) -> None:  # no request log on stderr
        pass


@pytest.fixture
def server(tmp_path, monkeypatch) -> Iterator[Path]:
    """A web root on 127.0.0.1 laid out as raw.githubusercontent.com (owner/name/commit/path), catalogue URLs
    pointed at it; a test copies the files it serves into the returned folder with ``_serve``."""
    root = tmp_path / "www"
    root.mkdir()
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=str(root)))
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    monkeypatch.setattr(catalog, "RAW_FILES_URL", f"http://127.0.0.1:{httpd.server_address[1]}")
    try:
        yield root
    finally:
        httpd.shutdown()
        httpd.server_close()


def _serve(root: Path, name: str, data: bytes | None = None) -> None:
    """Put the named trace (its true bytes from SERVESIM_DATA_DIR's test copy, or ``data``) where its URL points."""
    entry = TRACE_CATALOG[name]
    target = root / entry.repository / entry.commit / entry.path
    target.parent.mkdir(parents=True, exist_ok=True)
    if data is None:
        source = SESSION_DATA_DIR / entry.filename if SESSION_DATA_DIR else None
        if source is None or not source.is_file():
            missing_trace(name)
        shutil.copyfile(source, target)
    else:
        target.write_bytes(data)


def test_offline_refusal_is_one_line_naming_the_url_and_the_folder(cache, capsys, monkeypatch):
    monkeypatch.setenv("SERVESIM_OFFLINE", "1")
    entry = TRACE_CATALOG["azure-conv"]
    code, out, err = _cli(capsys, "workload", "fetch", "azure-conv")
    assert code == 2 and out == ""
    assert len(err.splitlines()) == 1, err
    assert err.startswith("servesim workload: error: trace 'azure-conv' is not on this machine and SERVESIM_OFFLINE")
    assert f"fetch {entry.url} and put it in {cache}/" in err
    assert entry.url.endswith(f"/Azure/AzurePublicDataset/{entry.commit}/data/AzureLLMInferenceTrace_conv.csv")


def test_network_failure_is_one_line_naming_the_url_and_the_folder(cache, capsys):
    # RAW_FILES_URL points at a local port just freed, where nothing listens: the connection is refused
    code, out, err = _cli(capsys, "workload", "fetch", "agent-rounds")
    assert code == 2 and out == ""
    assert len(err.splitlines()) == 1, err
    assert "trace 'agent-rounds' is not on this machine and downloading it failed (ConnectionError)" in err
    assert f"fetch {catalog.RAW_FILES_URL}/uw-syfi/TraceLab/{catalog.TRACELAB_COMMIT}/example_sessions/" in err
    assert f"put it in {cache}/" in err and not cache.joinpath("round_trace.jsonl").exists()


def test_missing_file_upstream_is_refused_in_one_line(cache, server, capsys):
    code, _, err = _cli(capsys, "workload", "fetch", "agent-rounds")  # the server has no such file
    assert code == 2 and len(err.splitlines()) == 1 and "downloading it failed (HTTP 404)" in err


def test_fetch_downloads_into_the_cache_checks_the_hash_then_reads_locally(cache, server, capsys):
    for name in SMALL:
        _serve(server, name)
    code, out, err = _cli(capsys, "workload", "fetch", *SMALL)
    assert code == 0, err
    for name in SMALL:
        entry = TRACE_CATALOG[name]
        path = cache / entry.filename
        assert hashlib.sha256(path.read_bytes()).hexdigest() == entry.sha256
        assert f"{name}: {path} (sha256 checked" in out
        assert f"servesim: downloading {name} ({entry.size_bytes:,} bytes) from {entry.url}" in err
        # the progress: tqdm's bar where tqdm is installed, else servesim's own line
        assert f"servesim: {name}: {entry.size_bytes:,} / {entry.size_bytes:,} bytes" in err or f"{name}: 100%" in err
    shutil.rmtree(server / "uw-syfi")  # gone upstream: the cache serves it now, without a download
    code, out, err = _cli(capsys, "workload", "fetch", "agent-rounds")
    assert code == 0 and "downloading" not in err and str(cache / "round_trace.jsonl") in out
    assert len(read_trace(str(cache / "round_trace.jsonl"))) == 19


def test_first_use_downloads(cache, server, capsys):
    _serve(server, "azure-code")
    path = trace_path("azure-code", TRACE_CATALOG["azure-code"])
    assert path == cache / "AzureLLMInferenceTrace_code.csv"
    assert "servesim: downloading azure-code" in capsys.readouterr().err


def test_a_download_with_other_bytes_is_refused_and_not_kept(cache, server):
    _serve(server, "agent-rounds", b'{"not": "the trace"}\n')
    entry = TRACE_CATALOG["agent-rounds"]
    with pytest.raises(TraceChecksumError) as err:
        download("agent-rounds", entry)
    message = str(err.value)
    assert "\n" not in message and message.startswith(f"{entry.url}: the downloaded file's sha256 is not")
    assert entry.sha256 in message
    assert not (cache / entry.filename).exists()


def test_a_stale_cache_file_is_downloaded_again(cache, server):
    entry = TRACE_CATALOG["agent-rounds"]
    cache.mkdir(parents=True)
    (cache / entry.filename).write_bytes(b"truncated")
    assert local_path(entry) is None
    _serve(server, "agent-rounds")
    path = trace_path("agent-rounds", entry)
    assert hashlib.sha256(path.read_bytes()).hexdigest() == entry.sha256


def test_a_data_dir_file_with_other_bytes_is_refused_in_one_line(cache, tmp_path, monkeypatch, capsys):
    folder = tmp_path / "data"
    folder.mkdir()
    entry = TRACE_CATALOG["azure-code"]
    (folder / entry.filename).write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:17:03.98,5,6\n")
    monkeypatch.setenv("SERVESIM_DATA_DIR", str(folder))
    code, out, err = _cli(capsys, "workload", "fetch", "azure-code")
    assert code == 2 and out == "" and len(err.splitlines()) == 1, err
    assert f"{folder / entry.filename}: sha256 " in err and f"is not the catalogue's {entry.sha256}" in err
    assert f"replace it with {entry.url}" in err
    with pytest.raises(TraceChecksumError):
        local_path(entry)


def test_data_dir_is_used_without_download(monkeypatch, tmp_path):
    """The session's SERVESIM_DATA_DIR (../shared/data/traces by default) serves every named trace in place."""
    for name in TRACE_CATALOG:
        require_trace(name)
    monkeypatch.setenv("SERVESIM_CACHE_DIR", str(tmp_path))
    for name, entry in TRACE_CATALOG.items():
        path = trace_path(name, entry)
        assert path.parent != tmp_path and path.name == entry.filename


def test_list_shows_sources_and_licences_and_downloads_nothing(cache, capsys):
    code, out, err = _cli(capsys, "workload", "list")
    assert code == 0 and err == ""
    for text in ("CC-BY-4.0", "Apache-2.0", "MIT", "kvcache-ai/Mooncake", "microsoft/vidur", "uw-syfi/TraceLab"):
        assert text in out
    assert f"downloaded on first use into {cache}" in out.replace("\n", "")
    assert not cache.exists()


def test_fetch_needs_names_or_all(capsys):
    code, _, err = _cli(capsys, "workload", "fetch")
    assert code == 2 and "give trace names or --all" in err
    code, _, err = _cli(capsys, "workload", "fetch", "nope")
    assert code == 2 and "unknown trace 'nope'; named: sharegpt-8k-multiturn" in err


def test_a_test_without_its_data_skips_naming_what_to_fetch(cache, monkeypatch):
    monkeypatch.delenv("SERVESIM_REQUIRE_TRACES", raising=False)
    with pytest.raises(pytest.skip.Exception) as skipped:
        require_trace("bwb")
    reason = str(skipped.value)
    assert TRACE_CATALOG["bwb"].url in reason and str(cache) in reason
    monkeypatch.setenv("SERVESIM_OFFLINE", "1")
    with pytest.raises(TraceUnavailable):  # what a test reading an absent trace meets; conftest skips on it
        resolve_source("bwb")
