"""Banking77 and CLINC150: official sizes, data directory, cache, checksums, offline messages.

No test reaches the network: ``conftest.py`` replaces the opener with one that fails the
test, and the download tests below install a fake opener serving local bytes.
"""

from __future__ import annotations

import hashlib
import io
import urllib.error

import pytest

from hybridroute.datasets import _public, load_dataset
from hybridroute.exceptions import DatasetError, DatasetUnavailableError

# Tests that read the public sets take the ``shared_dir`` / ``banking77`` / ``clinc150``
# fixtures, which skip (with the reason shown) when the data directory cannot be found.


def test_banking77_official_sizes(banking77):
    assert banking77.splits == {"train": 10_003, "test": 3_080}
    assert len(banking77.labels) == 77
    assert banking77.ids[0] == "train-00001" and banking77.ids[-1] == "test-03080"
    assert banking77.oos_label is None and banking77.fact_columns == ()
    assert banking77.notes == ()


def test_clinc150_official_sizes_with_oos_kept(clinc150):
    assert clinc150.oos_label == "oos"
    assert clinc150.splits == {"train": 15_100, "validation": 3_100, "test": 5_500}
    frame = clinc150.frame
    in_scope = frame[frame["label"] != "oos"]["split"].value_counts().to_dict()
    oos = frame[frame["label"] == "oos"]["split"].value_counts().to_dict()
    assert in_scope == {"train": 15_000, "validation": 3_000, "test": 4_500}
    assert oos == {"train": 100, "validation": 100, "test": 1_000}
    assert len(clinc150.labels) == 151
    # four texts carry two labels in the published data; kept, and said so
    assert len(clinc150.notes) == 4
    assert all("kept as published" in n for n in clinc150.notes)


def test_clinc150_drop_oos(shared_dir):
    ds = load_dataset("clinc150", oos="drop")
    assert ds.splits == {"train": 15_000, "validation": 3_000, "test": 4_500}
    assert len(ds.labels) == 150 and "oos" not in ds.labels and ds.oos_label is None
    with pytest.raises(ValueError, match="oos must be 'label' or 'drop'"):
        load_dataset("clinc150", oos="keep")


# How fast they load is a benchmark figure, not a test (a timed test fails under load):
# `python -m benchmarks --only classifiers` prints "banking77: load + fingerprint".


@pytest.mark.parametrize("ref", ["banking77", "clinc150"])
def test_environment_variable_and_parameter_agree(shared_dir, banking77, clinc150, ref):
    fixture = banking77 if ref == "banking77" else clinc150  # loaded with data_dir=
    ds = load_dataset(ref)  # from HYBRIDROUTE_DATA_DIR
    assert ds.fingerprint == fixture.fingerprint
    assert len(ds.fingerprint) == 64 and int(ds.fingerprint, 16) >= 0
    assert str(shared_dir) in ds.source


def test_checksums_match_the_reference_copies(shared_dir):
    for file in _public.BANKING77_FILES + _public.CLINC150_FILES:
        digest = hashlib.sha256((shared_dir / file.relpath).read_bytes()).hexdigest()
        assert digest == file.sha256, file.relpath
        assert file.url.startswith("https://raw.githubusercontent.com/")


# ------------------------------------------------------------------------- not available


def test_offline_with_downloads_off_names_where_it_looked(tmp_path):
    with pytest.raises(DatasetUnavailableError) as info:
        load_dataset("banking77", data_dir=tmp_path, download=False)
    msg = str(info.value)
    assert "banking77: banking77/train.csv is not available and downloads are off" in msg
    assert str(tmp_path / "banking77" / "train.csv") in msg
    assert "HYBRIDROUTE_DATA_DIR" in msg and _public.BANKING77_FILES[0].url in msg


def test_offline_environment_variable(tmp_path, monkeypatch):
    monkeypatch.setenv("HYBRIDROUTE_OFFLINE", "1")
    with pytest.raises(DatasetUnavailableError, match="HYBRIDROUTE_OFFLINE is set"):
        load_dataset("clinc150", data_dir=tmp_path)


def test_unreachable_source_gives_a_clear_offline_message(tmp_path, monkeypatch):
    def unreachable(request, timeout):
        raise urllib.error.URLError("[Errno -3] Temporary failure in name resolution")

    monkeypatch.setattr(_public, "_urlopen", unreachable)
    with pytest.raises(DatasetUnavailableError) as info:
        load_dataset("clinc150", data_dir=tmp_path)
    msg = str(info.value)
    assert msg.startswith(f"clinc150: cannot download {_public.CLINC150_FILES[0].url}")
    assert "are you offline?" in msg and "name resolution" in msg
    assert isinstance(info.value, DatasetError)
    assert not list((_public.cache_dir()).rglob("*.part-*"))


# ------------------------------------------------------------------------- fetching (faked)


class _FakeResponse(io.BytesIO):
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _serve(mapping: dict[str, bytes], calls: list[str]):
    def opener(request, timeout):
        calls.append(request.full_url)
        assert timeout > 0
        return _FakeResponse(mapping[request.full_url])

    return opener


def test_download_checks_the_checksum_and_caches(tmp_path, monkeypatch, banking77, shared_dir):
    monkeypatch.delenv("HYBRIDROUTE_DATA_DIR")
    files = {f.url: (shared_dir / f.relpath).read_bytes() for f in _public.BANKING77_FILES}
    calls: list[str] = []
    monkeypatch.setattr(_public, "_urlopen", _serve(files, calls))
    empty = tmp_path / "empty"
    empty.mkdir()
    ds = load_dataset("banking77", data_dir=empty)
    assert calls == [f.url for f in _public.BANKING77_FILES]
    assert ds.fingerprint == banking77.fingerprint  # same content, same fingerprint
    assert (_public.cache_dir() / "banking77" / "train.csv").is_file()
    assert "from https://" in ds.source
    # second load: from the cache, no network
    calls.clear()
    again = load_dataset("banking77", data_dir=empty)
    assert calls == [] and again.fingerprint == ds.fingerprint
    # a corrupted cache file is fetched again
    (_public.cache_dir() / "banking77" / "test.csv").write_bytes(b"text,category\nx,y\n")
    load_dataset("banking77")
    assert calls == [_public.BANKING77_FILES[1].url]


def test_download_with_a_wrong_checksum_caches_nothing(tmp_path, monkeypatch):
    (file,) = _public.CLINC150_FILES
    calls: list[str] = []
    monkeypatch.setattr(_public, "_urlopen", _serve({file.url: b'{"train": []}'}, calls))
    with pytest.raises(
        DatasetUnavailableError,
        match=r"has SHA-256 .* expected 36923c3705a59e08.*Nothing was cached",
    ):
        load_dataset("clinc150", data_dir=tmp_path)
    assert not (_public.cache_dir() / file.relpath).exists()
    assert not list(_public.cache_dir().rglob("*.part-*"))


def test_cache_dir_follows_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("HYBRIDROUTE_CACHE_DIR", str(tmp_path / "c"))
    assert _public.cache_dir() == tmp_path / "c" / "datasets"
    monkeypatch.delenv("HYBRIDROUTE_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "x"))
    assert _public.cache_dir() == tmp_path / "x" / "hybridroute" / "datasets"


def test_data_dir_copy_with_a_bad_row_names_it(tmp_path):
    bank = tmp_path / "banking77"
    bank.mkdir()
    (bank / "train.csv").write_text("text,category\nhello,a\n   ,b\n", encoding="utf-8")
    (bank / "test.csv").write_text("text,category\nbye,b\n", encoding="utf-8")
    with pytest.raises(
        DatasetError, match=r"banking77/train.csv, row 2, column 'text': the text is empty"
    ):
        load_dataset("banking77", data_dir=tmp_path, download=False)
