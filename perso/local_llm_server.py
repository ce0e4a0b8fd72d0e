"""``python -m perso.local_llm_server``: llama.cpp's OpenAI-compatible server (``xllamacpp``)
in this process, on one GGUF model, until SIGTERM or SIGINT. ``perso.local_llm`` starts it;
it needs the optional packages (``make llm-deps``).

One slot (one request decoded at a time: a second waits, and the tier's deadline bounds
the wait), a fixed sampling seed (the same prompt gets the same answer, which the
integration test relies on), a 4,096-token context (the tier's prompt is at most 2,000
tokens in and 500 out), prompt caching in a small RAM budget, ``/metrics`` on (the
benchmark reads the model's own compute time from it), no web UI.
"""

from __future__ import annotations

import argparse
import signal
import sys
from typing import Any

CONTEXT_TOKENS = 4096
SEED = 7
PROMPT_CACHE_MIB = 256
HTTP_THREADS = 2


def parameters(args: argparse.Namespace) -> Any:
    """The server's ``CommonParams`` for ``args``."""
    import xllamacpp  # noqa: PLC0415 - optional: only this process needs it

    params = xllamacpp.CommonParams()
    params.model.path = args.model
    params.model_alias = {args.alias}
    params.hostnames = [args.host]
    params.port = args.port
    params.n_ctx = CONTEXT_TOKENS
    params.n_parallel = 1
    params.cpuparams.n_threads = args.threads
    params.cpuparams_batch.n_threads = args.threads
    params.n_threads_http = HTTP_THREADS
    params.sampling.seed = SEED
    params.cache_ram_mib = PROMPT_CACHE_MIB
    params.endpoint_metrics = True
    params.ui = False
    return params


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--model", required=True, help="path of the GGUF file")
    parser.add_argument("--alias", required=True, help="the model name it answers to")
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args(argv)
    import xllamacpp  # noqa: PLC0415 - optional: only this process needs it

    stopping = {signal.SIGTERM, signal.SIGINT}
    # Blocked before the server's threads exist, so they inherit the mask and the signal
    # waits for sigwait below instead of landing in a thread of llama.cpp's.
    signal.pthread_sigmask(signal.SIG_BLOCK, stopping)
    try:
        server = xllamacpp.Server(parameters(args))
    except Exception as exc:  # the port taken, a bad model file: the parent retries or reports
        print(f"the model server did not start: {exc!r}", file=sys.stderr, flush=True)
        return 1
    print(f"model server listening on {server.listening_address}", flush=True)
    received = signal.sigwait(stopping)
    print(f"{signal.Signals(received).name}: stopping the model server", flush=True)
    del server  # its destructor stops the HTTP server and the decoding loop
    return 0


if __name__ == "__main__":
    sys.exit(main())
