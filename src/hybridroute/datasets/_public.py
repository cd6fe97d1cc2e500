"""The public sets (Banking77, CLINC150): where their files are found, fetched and cached.

Each file is looked for, in order:

1. in the data directory (the ``data_dir`` argument, else ``HYBRIDROUTE_DATA_DIR``), laid
   out as ``banking77/train.csv``, ``banking77/test.csv``, ``clinc150/data_full.json``;
2. in the cache (``HYBRIDROUTE_CACHE_DIR``, else ``$XDG_CACHE_HOME/hybridroute``, else
   ``~/.cache/hybridroute``), under ``datasets/`` with the same layout; a cached file whose
   SHA-256 does not match is fetched again;
3. at its public URL, downloaded into the cache and checked against its SHA-256. Nothing
   is downloaded when ``download=False`` or ``HYBRIDROUTE_OFFLINE`` is set; then, or when
   the download fails, :class:`~hybridroute.exceptions.DatasetUnavailableError` says
   where the file was looked for and how to provide it.

Files found in the data directory are the user's own copies and are read as they are,
through the same readers as any labelled file: regular files only, at most
:data:`~hybridroute.datasets._io.MAX_FILE_BYTES` (``HYBRIDROUTE_MAX_DATASET_BYTES``),
CLINC150's JSON parsed strictly (no duplicate keys, deep nesting, huge integers or NaN).
A cached file is checked against its SHA-256 reading at most
:data:`MAX_DOWNLOAD_BYTES`, the most a download may be.
"""

from __future__ import annotations

import hashlib
import os
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .._cachedir import cache_root
from .._safeio import parse_json, read_bytes
from .._version import __version__
from ..exceptions import DatasetError, DatasetUnavailableError, InputError
from ._io import RawTable, read_csv, read_limited
from ._labelled import LabelledSet
from ._validate import Options, build

#: Refuse downloads larger than this (the largest file here is about 2.5 MB).
MAX_DOWNLOAD_BYTES = 64 * 1024 * 1024
DOWNLOAD_TIMEOUT_S = 60.0

_urlopen = urllib.request.urlopen  # tests replace this; nothing else should


@dataclass(frozen=True, slots=True)
class RemoteFile:
    """One file of a public set: its place in the data layout, URL and SHA-256."""

    relpath: str
    url: str
    sha256: str


_B77 = "https://raw.githubusercontent.com/PolyAI-LDN/task-specific-datasets/master/banking_data"
_CLINC = "https://raw.githubusercontent.com/clinc/oos-eval/master/data"

BANKING77_FILES = (
    RemoteFile(
        "banking77/train.csv",
        f"{_B77}/train.csv",
        "b06e26ac675513959a63135f11b94ea7786ed02da65db93a5650d8838cbc664b",
    ),
    RemoteFile(
        "banking77/test.csv",
        f"{_B77}/test.csv",
        "d12d6e3bc4c3103966ae786dc435913c0c563dfa328f5a3646d0e62cfeeb474d",
    ),
)
CLINC150_FILES = (
    RemoteFile(
        "clinc150/data_full.json",
        f"{_CLINC}/data_full.json",
        "36923c3705a59e08fe9c3883d8bc2dd966ef93e22cb78ac41171782a698d56e0",
    ),
)

# CLINC150's keys, in the row order used here, with the split each goes to.
_CLINC_KEYS = (
    ("train", "train", False),
    ("oos_train", "train", True),
    ("val", "validation", False),
    ("oos_val", "validation", True),
    ("test", "test", False),
    ("oos_test", "test", True),
)
CLINC_OOS_LABEL = "oos"


# --------------------------------------------------------------------------- locations


def resolve_data_dir(explicit: str | os.PathLike[str] | None = None) -> Path | None:
    """The data directory: ``explicit`` if given, else ``HYBRIDROUTE_DATA_DIR``, else None."""
    if explicit is not None:
        return Path(explicit).expanduser()
    env = os.environ.get("HYBRIDROUTE_DATA_DIR")
    return Path(env).expanduser() if env else None


def cache_dir() -> Path:
    """Where downloaded public sets are kept (``.../hybridroute/datasets``)."""
    return cache_root() / "datasets"


def _offline() -> bool:
    return os.environ.get("HYBRIDROUTE_OFFLINE", "").strip().lower() not in ("", "0", "false", "no")


def _sha256_file(path: Path) -> str | None:
    """SHA-256 of a cached file, or None when it cannot be a good copy (not a regular
    file, unreadable, or larger than any download may be)."""
    try:
        data = read_bytes(path, limit=MAX_DOWNLOAD_BYTES, what="cached file")
    except InputError:
        return None
    return hashlib.sha256(data).hexdigest()


def where_from(files: tuple[RemoteFile, ...], data_dir_: Path | None) -> str:
    """Where a set would load from now, without loading: data dir, cache, or download."""
    if data_dir_ is not None and all((data_dir_ / f.relpath).is_file() for f in files):
        return f"data directory {data_dir_}"
    cache = cache_dir()
    if all((cache / f.relpath).is_file() for f in files):
        return f"cache {cache}"
    return "not here yet; downloads on first use" if not _offline() else "not available offline"


def locate(
    name: str, file: RemoteFile, *, data_dir_: Path | None, download: bool
) -> tuple[Path, str]:
    """Find ``file`` (data dir, cache, else download); return its path and a source note."""
    looked: list[str] = []
    if data_dir_ is not None:
        candidate = data_dir_ / file.relpath
        if candidate.is_file():
            return candidate, str(candidate)
        looked.append(_looked_at(candidate))
    cached = cache_dir() / file.relpath
    if cached.is_file():
        if _sha256_file(cached) == file.sha256:
            return cached, f"{cached} (from {file.url})"
        looked.append(f"{cached} (checksum mismatch)")
    else:
        looked.append(_looked_at(cached))
    if not download or _offline():
        why = "downloads are off (download=False)" if not download else "HYBRIDROUTE_OFFLINE is set"
        raise DatasetUnavailableError(
            f"{name}: {file.relpath} is not available and {why}; looked in {'; '.join(looked)}. "
            f"{_how_to_provide(file)}"
        )
    _download(name, file, cached, looked)
    return cached, f"{cached} (from {file.url})"


def _looked_at(path: Path) -> str:
    """``path`` for the "looked in" list, noting one that exists but is no regular file."""
    return f"{path} (not a regular file)" if os.path.lexists(path) else str(path)


def _how_to_provide(file: RemoteFile) -> str:
    return (
        f"Download {file.url} and put it at DIR/{file.relpath} with "
        "HYBRIDROUTE_DATA_DIR=DIR (or pass data_dir=DIR), or retry with network access."
    )


def _download(name: str, file: RemoteFile, dest: Path, looked: list[str]) -> None:
    """Fetch ``file.url`` into ``dest`` atomically, checking size and SHA-256."""
    try:
        dest.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise DatasetUnavailableError(
            f"{name}: cannot create the cache directory {dest.parent} ({exc.strerror}); "
            "set HYBRIDROUTE_CACHE_DIR to a writable directory"
        ) from None
    tmp = dest.with_name(f"{dest.name}.part-{os.getpid()}")
    h = hashlib.sha256()
    size = 0
    request = urllib.request.Request(file.url, headers={"User-Agent": f"hybridroute/{__version__}"})
    try:
        with _urlopen(request, timeout=DOWNLOAD_TIMEOUT_S) as resp, tmp.open("wb") as out:
            while True:
                chunk = resp.read(1 << 16)
                if not chunk:
                    break
                size += len(chunk)
                if size > MAX_DOWNLOAD_BYTES:
                    raise DatasetUnavailableError(
                        f"{name}: {file.url} is larger than {MAX_DOWNLOAD_BYTES:,} bytes; refused"
                    )
                h.update(chunk)
                out.write(chunk)
    except DatasetUnavailableError:
        tmp.unlink(missing_ok=True)
        raise
    except (urllib.error.URLError, OSError, TimeoutError, ValueError) as exc:
        tmp.unlink(missing_ok=True)
        reason = getattr(exc, "reason", None) or exc
        raise DatasetUnavailableError(
            f"{name}: cannot download {file.url} ({reason}) — are you offline? "
            f"Looked in {'; '.join(looked)}. {_how_to_provide(file)}"
        ) from None
    digest = h.hexdigest()
    if digest != file.sha256:
        tmp.unlink(missing_ok=True)
        raise DatasetUnavailableError(
            f"{name}: the file downloaded from {file.url} has SHA-256 {digest[:16]}…, "
            f"expected {file.sha256[:16]}…; the source changed or the download was "
            "corrupted. Nothing was cached."
        )
    os.replace(tmp, dest)


# --------------------------------------------------------------------------- loaders


def load_banking77(
    *, data_dir: str | os.PathLike[str] | None = None, download: bool = True
) -> LabelledSet:
    """Banking77: 13,083 online-banking queries, 77 intents; official train / test.

    Casanueva et al. 2020, PolyAI, CC BY 4.0. Ids are ``train-00001``... and
    ``test-00001``... in file order.
    """
    ddir = resolve_data_dir(data_dir)
    records: list[tuple[str, int, dict[str, Any]]] = []
    sources = []
    header: list[str] = []
    for file, split in zip(BANKING77_FILES, ("train", "test"), strict=True):
        path, note = locate("banking77", file, data_dir_=ddir, download=download)
        sources.append(note)
        raw = read_csv(path)
        if raw.row_errors:
            raise raw.row_errors[0]
        header = raw.columns
        for p, row, rec in raw.records:
            rec["split"] = split
            rec["id"] = f"{split}-{row:05d}"
            records.append((p, row, rec))
    table = RawTable("banking77", "csv", [*header, "split", "id"], records)
    opt = Options(label_column="category", split_required=True, allow_conflicts=True)
    built = build(table, opt)
    return LabelledSet._from_built(
        built,
        name="banking77",
        source="; ".join(sources),
        provenance={"loader": "banking77", "options": {}},
    )


def load_clinc150(
    *,
    data_dir: str | os.PathLike[str] | None = None,
    download: bool = True,
    oos: str = "label",
) -> LabelledSet:
    """CLINC150 ("full"): 150 intents over 10 domains plus out-of-scope queries.

    Larson et al. 2019, CC BY 3.0. In-scope rows are split 15,000 / 3,000 / 4,500 into
    train / validation / test, and out-of-scope rows 100 / 100 / 1,000 into the same splits.

    Parameters
    ----------
    oos : {"label", "drop"}, default "label"
        ``"label"`` keeps out-of-scope rows with the label ``"oos"`` (the set's
        :attr:`~LabelledSet.oos_label`); ``"drop"`` leaves them out, for in-scope accuracy.
    """
    if oos not in ("label", "drop"):
        raise ValueError(f"oos must be 'label' or 'drop', not {oos!r}")
    ddir = resolve_data_dir(data_dir)
    (file,) = CLINC150_FILES
    path, note = locate("clinc150", file, data_dir_=ddir, download=download)
    data = read_limited(path)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise DatasetError(f"not UTF-8 (byte {exc.start})", path=str(path)) from None
    try:
        obj = parse_json(text.removeprefix("\ufeff"), source=str(path))
    except InputError as exc:
        where = f" (line {exc.line})" if exc.line is not None else ""
        raise DatasetError(f"{exc.reason}{where}", path=str(path)) from None
    if not isinstance(obj, dict):
        raise DatasetError("expected a JSON object of lists", path=str(path))
    records: list[tuple[str, int, dict[str, Any]]] = []
    for key, split, is_oos in _CLINC_KEYS:
        if is_oos and oos == "drop":
            continue
        where = f"{path}#{key}"
        items = obj.get(key)
        if not isinstance(items, list):
            raise DatasetError(f"missing the list {key!r}", path=str(path), column=key)
        prefix = f"oos_{split}" if is_oos else split
        for i, item in enumerate(items, start=1):
            if not (isinstance(item, list) and len(item) == 2):
                raise DatasetError("expected a [text, label] pair", path=where, row=i)
            records.append(
                (
                    where,
                    i,
                    {"id": f"{prefix}-{i:05d}", "text": item[0], "label": item[1], "split": split},
                )
            )
    table = RawTable(str(path), "json", ["id", "text", "label", "split"], records)
    built = build(table, Options(split_required=True, allow_conflicts=True))
    return LabelledSet._from_built(
        built,
        name="clinc150",
        source=note,
        oos_label=CLINC_OOS_LABEL if oos == "label" else None,
        provenance={"loader": "clinc150", "options": {"oos": oos}},
    )
