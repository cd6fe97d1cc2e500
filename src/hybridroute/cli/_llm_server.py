"""``hybridroute llm-server``: a real language model on 127.0.0.1 for the LLM classifier.

Starts llama-cpp-python's OpenAI-compatible server for a GGUF file -- by default the
SmolLM2-135M-Instruct (Q4_1) that the ``llm-local`` extra ships -- prints its base URL and
the classifier settings that point at it, and stops it on Ctrl-C. The same settings, with
another ``model`` / ``api_base``, reach a hosted provider through litellm.

The shipped model has 135M parameters: a real tokenizer, chat template and grammar for
the client stack, not a good classifier; its accuracy says nothing about a hosted
model's.
"""

from __future__ import annotations

import json
import signal
from pathlib import Path
from typing import TYPE_CHECKING

import typer

if TYPE_CHECKING:
    from ..classifiers.llm._local_server import LocalModelServer

_MODEL_HELP = (
    "GGUF model file (default: SmolLM2-135M-Instruct Q4_1, shipped by the llm-local "
    "extra; any instruct GGUF you have works, e.g. a larger model)."
)
_THREADS_HELP = (
    "Threads for generation and prompt processing (default: cores - 1, at least 1; "
    "llama.cpp gains nothing past the physical cores, and the rest of the machine keeps one)."
)


def register(app: typer.Typer) -> None:
    """Register ``llm-server`` on ``app``."""

    @app.command("llm-server")
    def llm_server(
        model: Path | None = typer.Option(None, "--model", help=_MODEL_HELP),
        port: int = typer.Option(8080, "--port", help="Port (0: any free port)."),
        host: str = typer.Option(
            "127.0.0.1", "--host", help="Address to listen on (default: this machine only)."
        ),
        threads: int | None = typer.Option(None, "--threads", help=_THREADS_HELP),
        alias: str = typer.Option(
            "smol", "--alias", help="Model name clients ask for (litellm: openai/ALIAS)."
        ),
        ctx: int = typer.Option(2048, "--ctx", help="Context length in tokens."),
        ready_timeout: float = typer.Option(
            120.0, "--ready-timeout", help="Seconds to wait for the server to answer."
        ),
    ) -> None:
        """Serve a GGUF model on an OpenAI-compatible API for the LLM classifier."""
        from ..classifiers.llm._local_server import LocalModelServer, default_threads

        server = LocalModelServer(
            model, host=host, port=port, threads=threads, alias=alias, n_ctx=ctx
        )
        previous = signal.getsignal(signal.SIGTERM)
        # `kill PID` stops the server too, from the start: a SIGTERM while it loads or while
        # its URL is printed still stops it and removes its temporary log
        signal.signal(signal.SIGTERM, _interrupt)
        try:
            try:
                server.start(timeout=ready_timeout)
            except RuntimeError as exc:
                from ._app import fail

                raise fail(
                    str(exc).splitlines()[0] + f" (log: {server.log_path})", code=1
                ) from None
            _print_settings(server, threads if threads is not None else default_threads())
            status = server.wait()
            if status != 0:
                from ._app import fail

                tail = server.log_tail(400).strip().splitlines()
                raise fail(
                    f"the model server exited with status {status}"
                    + (f": {tail[-1]}" if tail else ""),
                    code=1,
                )
        except KeyboardInterrupt:
            typer.echo("stopping the model server", err=True)
        finally:
            signal.signal(signal.SIGTERM, previous)
            server.stop()
        raise typer.Exit(0)


def _print_settings(server: LocalModelServer, n_threads: int) -> None:
    """The server's URL and the classifier settings that point at it."""
    settings = server.classifier_settings()
    typer.echo(
        f"serving {Path(str(server.model)).name} on {server.api_base} "
        f"({n_threads} thread{'s' * (n_threads != 1)}, pid {server.pid}, "
        f"log {server.log_path}); Ctrl-C stops it"
    )
    typer.echo(f"classifier settings: {json.dumps(settings)}")
    typer.echo(
        f'  python: LLMClassifier("{settings["model"]}", api_base="{settings["api_base"]}", '
        f'server="{settings["server"]}")'
    )
    typer.echo(f"  command line: --model {settings['model']} --api-base {settings['api_base']}")
    typer.echo(
        "  a hosted provider: the same settings with its model string "
        "(openai/gpt-4o-mini, anthropic/...) and no api_base / server"
    )


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt
