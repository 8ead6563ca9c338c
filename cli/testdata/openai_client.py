"""Drives a running `anechat serve` with the official openai Python client.

cli/serve_clients_test.go starts the server and runs this script with the
venv that build/scripts/deps-openai.sh installs:

    python openai_client.py BASE_URL TOKEN MODEL OPENING...

It prints one JSON object of what the client saw; the Go test checks it.
"""

import json
import sys

import openai
from openai import OpenAI


def error_of(call):
    """The status, class and param of the API error call raises, or None."""
    try:
        call()
    except openai.APIStatusError as e:
        return {"status": e.status_code, "class": type(e).__name__, "param": getattr(e, "param", None)}
    return None


def main():
    base, token, model = sys.argv[1:4]  # then the interleaved conversations' openings
    # No retries: a refused request must show as refused.
    client = OpenAI(base_url=base, api_key=token, max_retries=0)
    msgs = [{"role": "user", "content": "Once upon a time"}]
    out = {"version": openai.__version__}

    r = client.chat.completions.create(model=model, messages=msgs, max_tokens=16, temperature=0)
    ch = r.choices[0]
    out["chat"] = {
        "role": ch.message.role,
        "content": ch.message.content,
        "finish": ch.finish_reason,
        "usage": [r.usage.prompt_tokens, r.usage.completion_tokens, r.usage.total_tokens],
        "anechat": (r.model_extra or {}).get("anechat"),
    }

    pieces, finish, usage = [], None, None
    stream = client.chat.completions.create(
        model=model, messages=msgs, max_tokens=16, temperature=0, stream=True, stream_options={"include_usage": True}
    )
    for chunk in stream:
        if chunk.usage is not None:
            usage = [chunk.usage.prompt_tokens, chunk.usage.completion_tokens, chunk.usage.total_tokens]
        for c in chunk.choices:
            if c.delta.content:
                pieces.append(c.delta.content)
            if c.finish_reason:
                finish = c.finish_reason
    out["stream"] = {"pieces": pieces, "finish": finish, "usage": usage}

    wrong = OpenAI(base_url=base, api_key="wrong-token-0123456789abcdef", max_retries=0)
    out["errors"] = {
        "unknown_model": error_of(lambda: client.chat.completions.create(model="no-such-model", messages=msgs)),
        "bad_value": error_of(lambda: client.chat.completions.create(model=model, messages=msgs, max_tokens=0)),
        "bad_token": error_of(lambda: wrong.models.list()),
    }

    # Hang up after two pieces of a long reply; the server stops at once
    # and the next request runs.
    got = []
    stream = client.chat.completions.create(
        model=model,
        messages=[{"role": "user", "content": "Lily"}],
        max_tokens=1500,
        stream=True,
        extra_body={"anechat": {"width": 1}},
    )
    for chunk in stream:
        if chunk.choices and chunk.choices[0].delta.content:
            got.append(chunk.choices[0].delta.content)
            if len(got) == 2:
                break
    stream.close()
    out["cancelled"] = got
    after = client.chat.completions.create(model=model, messages=msgs, max_tokens=4, temperature=0)
    out["after_cancel"] = after.choices[0].message.content

    c = client.completions.create(model=model, prompt="Once upon a time", max_tokens=8, temperature=0)
    out["completion"] = {"text": c.choices[0].text, "finish": c.choices[0].finish_reason,
                         "usage": [c.usage.prompt_tokens, c.usage.completion_tokens]}
    out["models"] = [m.id for m in client.models.list()]

    # Logprobs read through the client's own types, whole and streamed: chat
    # (logprobs, top_logprobs) and text completions (logprobs N).
    def entries(content):
        return [[t.token, t.logprob, t.bytes, [[a.token, a.logprob, a.bytes] for a in t.top_logprobs]] for t in content]

    r = client.chat.completions.create(
        model=model, messages=msgs, max_tokens=8, temperature=0, logprobs=True, top_logprobs=3
    )
    chat_lp = {"content": r.choices[0].message.content, "whole": entries(r.choices[0].logprobs.content), "streamed": []}
    for chunk in client.chat.completions.create(
        model=model, messages=msgs, max_tokens=8, temperature=0, logprobs=True, top_logprobs=3, stream=True
    ):
        for ch in chunk.choices:
            if ch.logprobs is not None and ch.logprobs.content:
                chat_lp["streamed"] += entries(ch.logprobs.content)
    out["chat_logprobs"] = chat_lp

    def legacy(lp):
        return [lp.tokens, lp.token_logprobs, lp.top_logprobs, lp.text_offset]

    c = client.completions.create(model=model, prompt="Once upon a time", max_tokens=6, temperature=0, logprobs=2)
    text_lp = {"text": c.choices[0].text, "whole": legacy(c.choices[0].logprobs), "streamed": [[], [], [], []]}
    for chunk in client.completions.create(
        model=model, prompt="Once upon a time", max_tokens=6, temperature=0, logprobs=2, stream=True
    ):
        for ch in chunk.choices:
            if ch.logprobs is not None:
                for k, part in enumerate(legacy(ch.logprobs)):
                    text_lp["streamed"][k] += part
    out["text_logprobs"] = text_lp
    out["logprobs_error"] = error_of(
        lambda: client.chat.completions.create(model=model, messages=msgs, logprobs=True, top_logprobs=21)
    )

    # Three clients' conversations taking turns (an editor, an agent, the
    # app): the opening of each, then the next turn of each. The test checks
    # that every next turn resumed and that the texts are a fresh run's.
    convs = [[{"role": "user", "content": o}] for o in sys.argv[4:]]
    turns = [[] for _ in convs]
    for _ in range(2):
        for i, c in enumerate(convs):
            r = client.chat.completions.create(model=model, messages=c, max_tokens=8, temperature=0)
            fig = (r.model_extra or {}).get("anechat") or {}
            turns[i].append({"messages": list(c), "content": r.choices[0].message.content,
                             "prompt": r.usage.prompt_tokens, "resumed": fig.get("resumed_tokens")})
            c += [{"role": "assistant", "content": r.choices[0].message.content}, {"role": "user", "content": "And then?"}]
    out["interleaved"] = turns
    print(json.dumps(out))


if __name__ == "__main__":
    main()
