"""Drives the Ollama routes of a running `anechat serve` with the official
ollama Python client.

cli/serve_clients_test.go starts the server and runs this script with the
venv that build/scripts/deps-ollama.sh installs:

    python ollama_client.py HOST TOKEN MODEL

HOST is the server's address without /v1 (Ollama's OLLAMA_HOST). It prints
one JSON object of what the client saw; the Go test checks it.
"""

import json
import sys
from importlib import metadata

import httpx
import ollama


def error_of(call):
    """The status and message of the ResponseError call raises, or None."""
    try:
        r = call()
        if not isinstance(r, (dict, ollama.ChatResponse, ollama.GenerateResponse)):
            list(r)  # a stream raises as it is read
    except ollama.ResponseError as e:
        return {"status": e.status_code, "error": e.error}
    return None


def final(r):
    """The counts and durations of a finished reply."""
    return {
        "done": r.done,
        "done_reason": r.done_reason,
        "prompt_eval_count": r.prompt_eval_count,
        "eval_count": r.eval_count,
        "durations": [r.total_duration, r.load_duration, r.prompt_eval_duration, r.eval_duration],
    }


def main():
    host, token, model = sys.argv[1:4]
    auth = {"Authorization": f"Bearer {token}"}
    client = ollama.Client(host=host, headers=auth)
    msgs = [{"role": "user", "content": "Once upon a time"}]
    opts = {"temperature": 0, "num_predict": 16}
    out = {"version": metadata.version("ollama")}

    r = client.chat(model=model, messages=msgs, options=opts)
    out["chat"] = {"role": r.message.role, "content": r.message.content, **final(r)}

    pieces, last = [], None
    for part in client.chat(model=model, messages=msgs, options=opts, stream=True):
        if part.message.content:
            pieces.append(part.message.content)
        last = part
    out["chat_stream"] = {"pieces": pieces, **final(last)}

    g = client.generate(model=model, prompt="Once upon a time", options=opts)
    out["generate"] = {"response": g.response, "context": list(g.context or []), **final(g)}
    pieces, last = [], None
    for part in client.generate(model=model, prompt="Once upon a time", options=opts, stream=True):
        pieces.append(part.response)
        last = part
    out["generate_stream"] = {"pieces": pieces, "context": list(last.context or []), **final(last)}
    # The context sent back: the next prompt continues the exchange.
    c = client.generate(model=model, prompt=" The end.", raw=True, context=g.context, options={"num_predict": 4, "temperature": 0})
    out["continued"] = {"prompt_eval_count": c.prompt_eval_count, "context": list(c.context or [])}

    out["list"] = [
        {
            "model": m.model,
            "size": int(m.size),
            "digest": m.digest,
            "modified": m.modified_at.isoformat() if m.modified_at else None,
            "details": m.details.model_dump(),
        }
        for m in client.list().models
    ]
    s = client.show(model)
    out["show"] = {"details": s.details.model_dump(), "model_info": dict(s.modelinfo or {}), "capabilities": s.capabilities}
    # The client has no call for /api/version: its own HTTP client asks.
    out["server_version"] = httpx.get(f"{host}/api/version", headers=auth).json()

    wrong = ollama.Client(host=host, headers={"Authorization": "Bearer wrong-token-0123456789abcdef"})
    out["errors"] = {
        "unknown_model": error_of(lambda: client.chat(model="no-such-model", messages=msgs)),
        "unknown_model_stream": error_of(lambda: client.chat(model="no-such-model", messages=msgs, stream=True)),
        "bad_option": error_of(lambda: client.generate(model=model, prompt="x", options={"top_k": 40})),
        "format": error_of(lambda: client.chat(model=model, messages=msgs, format="json")),
        "bad_token": error_of(lambda: wrong.list()),
        "unknown_show": error_of(lambda: client.show("no-such-model")),
    }
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
