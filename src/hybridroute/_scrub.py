"""The one path every artifact hybridroute writes takes on its way out.

Reports (JSON, Markdown, HTML, the errors file), MLflow run names, parameters, metric
names, tags, dictionaries, tables and files, the JSON and text a command prints, and
experiment tables are all written from :meth:`Scrubber.value` / :meth:`Scrubber.text`
(or :meth:`Scrubber.json`, :meth:`Scrubber.csv_cell`, :meth:`Scrubber.copy_file`, which
are built on them). A scrubber applies the decision log's redaction
(:class:`hybridroute._redact.Redactor`, where every rule lives) to whole documents and
adds what writing needs (formats, file copies, MLflow names):

* **credentials** are replaced by ``[REDACTED]``: values under credential-like keys,
  provider-key-shaped strings (``sk-...``, ``sk-ant-...``, ``AKIA...``, ``ghp_...``,
  ``Bearer ...``), the values of credential-like environment variables, and the password
  of a URL (``postgresql://user:[REDACTED]@host/db``) -- in values, free text and
  dictionary keys alike (a drift window or a confusion-matrix label is a key);
* **declared sensitive facts** (a command's ``--sensitive NAME``) are replaced by the salted
  HMAC the decision log stores for them (``hmac-sha256:<hex>``): values under a key of that
  name, and -- once the scrubber has seen the facts the command reads
  (:meth:`Scrubber.learn`) -- every occurrence of such a value anywhere else, a ticket
  text that quotes the customer's email included;
* in CSV files, a text cell a spreadsheet would run as a formula is escaped
  (:func:`hybridroute._csv.escape_formula`, OWASP CSV injection).

Counts under a key that merely names tokens (``prompt_tokens``, ``usage_completion_tokens``)
are numbers, not credentials, and are kept. Redaction is idempotent, so a document that
passes through two writers (a report directory later logged to MLflow) comes out the same.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from ._canonical import snapshot_hash
from ._csv import escape_formula
from ._redact import REDACTED, Redactor

__all__ = ["Scrubber"]

_MLFLOW_NAME_REDACTED = "REDACTED"


class Scrubber:
    """Scrubs documents, strings, CSV cells and files before hybridroute writes them.

    Parameters
    ----------
    sensitive_fields : iterable of str
        Fact names whose values are written as salted hashes (a command's ``--sensitive``).
    salt : str or bytes, optional
        The salt of those hashes; default ``HYBRIDROUTE_LOG_SALT`` (required when
        ``sensitive_fields`` is not empty, as for the decision log).
    redactor : Redactor, optional
        Use this redactor instead of building one from the two arguments above.

    Notes
    -----
    The credential-like environment variables are read when the scrubber is built: build
    one per command (or writer), not one per process.
    """

    def __init__(
        self,
        sensitive_fields: Iterable[str] = (),
        salt: str | bytes | None = None,
        *,
        redactor: Redactor | None = None,
    ) -> None:
        self.redactor = redactor if redactor is not None else Redactor(sensitive_fields, salt)

    @property
    def sensitive_fields(self) -> frozenset[str]:
        """The declared sensitive fact names."""
        return self.redactor.sensitive_fields

    # ------------------------------------------------------------------ learning
    def learn(self, facts_rows: Iterable[Mapping[str, Any] | None]) -> Scrubber:
        """Remember the values of the declared sensitive facts in ``facts_rows``, so that
        they are hashed wherever they appear (see :meth:`Redactor.learn`); returns self."""
        self.redactor.learn(facts_rows)
        return self

    # ------------------------------------------------------------------ strings
    def text(self, text: str) -> str:
        """``text`` with credentials and learned sensitive values replaced."""
        return self.redactor.scrub_text(text) if text else text

    def name(self, name: Any) -> str:
        """A scrubbed MLflow name (run, parameter, metric or tag key): brackets are not
        allowed there, so a removed credential reads ``REDACTED``."""
        out = self.text(str(name))
        return out.replace(REDACTED, _MLFLOW_NAME_REDACTED)

    # ------------------------------------------------------------------ documents
    def value(self, value: Any) -> Any:
        """A plain-JSON copy of ``value`` (mappings, lists, strings, numbers) scrubbed
        throughout (:meth:`Redactor.scrub`): what every written document is made from."""
        return self.redactor.scrub(value)

    def record(self, record: Mapping[str, Any]) -> dict[str, Any]:
        """A decision record as the decision log would store it (:meth:`Redactor.apply`),
        then scrubbed like any document; its ``snapshot_hash`` is the hash of the snapshot
        written."""
        stored = self.redactor.apply(record)
        clean = self.value(stored)
        if clean.get("input_snapshot") != stored.get("input_snapshot"):
            clean["snapshot_hash"] = snapshot_hash(clean["input_snapshot"])
        return clean

    def json(self, value: Any, **dumps: Any) -> str:
        """``json.dumps`` of the scrubbed ``value`` (``ensure_ascii=False`` unless given)."""
        dumps.setdefault("ensure_ascii", False)
        return json.dumps(self.value(value), **dumps)

    def csv_cell(self, value: Any) -> Any:
        """A CSV cell: text scrubbed and escaped against spreadsheet formulas; numbers and
        booleans as they are; ``None`` as an empty cell."""
        if value is None:
            return ""
        if isinstance(value, bool) or (
            isinstance(value, (int, float)) and not isinstance(value, str)
        ):
            return value
        return escape_formula(self.text(str(value)))

    # ------------------------------------------------------------------ files
    def copy_file(self, src: str | Path, dst: str | Path) -> bool:
        """Copy ``src`` to ``dst``, scrubbing it when it is UTF-8 text (reports, JSON, CSV,
        YAML); other files (plots) are copied as they are. True when the copy differs."""
        data = Path(src).read_bytes()
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            text = None
        if text is None or "\x00" in text:
            shutil.copyfile(src, dst)
            return False
        clean = self.text(text)
        Path(dst).write_bytes(clean.encode("utf-8"))
        return clean != text

    def copy_tree(self, src: str | Path, dst: str | Path) -> None:
        """Copy a directory with :meth:`copy_file` (file and folder names scrubbed too)."""
        src, dst = Path(src), Path(dst)
        dst.mkdir(parents=True, exist_ok=True)
        for entry in sorted(src.iterdir()):
            target = dst / self.text(entry.name).replace("/", "_")
            if entry.is_symlink():
                continue  # a report directory holds none; never follow one out of it
            if entry.is_dir():
                self.copy_tree(entry, target)
            elif entry.is_file():
                self.copy_file(entry, target)
