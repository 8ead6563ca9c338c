"""Drives anechat's server with the official openai Python client's function
calling: server/tools_test.go's TestRealClients starts a server whose
"qwen-tools" model answers with a call, and runs this script with the venv
that build/scripts/deps-openai.sh installs:

    python openai_tools.py BASE_URL TOKEN

It prints one JSON object of what the client saw; the Go test checks it.
"""

import json
import sys

import openai
from openai import OpenAI

WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "Current weather in a city.",
    "parameters": {"type": "object", "properties": {"location": {"type": "string"}}, "required": ["location"]}}}


def calls_of(message):
    return [{"id": c.id, "type": c.type, "name": c.function.name, "arguments": c.function.arguments}
            for c in message.tool_calls or []]


def main():
    base, token = sys.argv[1:3]
    client = OpenAI(base_url=base, api_key=token, max_retries=0)
    msgs = [{"role": "user", "content": "Weather in Paris?"}]
    args = dict(model="qwen-tools", messages=msgs, tools=[WEATHER], temperature=0, max_tokens=200)
    out = {"version": openai.__version__}

    r = client.chat.completions.create(**args)
    m = r.choices[0].message
    out["call"] = {"content": m.content, "calls": calls_of(m), "finish": r.choices[0].finish_reason,
                   "prompt": r.usage.prompt_tokens}

    # The tool's result goes back with the assistant's message as the client
    # returned it.
    history = msgs + [m.model_dump(exclude_none=True),
                      {"role": "tool", "tool_call_id": m.tool_calls[0].id, "content": json.dumps({"sky": "sunny"})}]
    r2 = client.chat.completions.create(**{**args, "messages": history})
    out["round_trip"] = {"finish": r2.choices[0].finish_reason, "prompt": r2.usage.prompt_tokens,
                         "calls": calls_of(r2.choices[0].message)}

    # Streamed: the chunks as they come, reassembled by index as OpenAI's
    # documentation does, and the client's own stream helper.
    content, calls = "", {}
    finish = None
    for chunk in client.chat.completions.create(**args, stream=True):
        for ch in chunk.choices:
            content += ch.delta.content or ""
            for d in ch.delta.tool_calls or []:
                c = calls.setdefault(d.index, {"id": None, "name": "", "arguments": ""})
                c["id"] = d.id or c["id"]
                if d.function:
                    c["name"] += d.function.name or ""
                    c["arguments"] += d.function.arguments or ""
            finish = ch.finish_reason or finish
    out["stream"] = {"content": content, "calls": [calls[i] for i in sorted(calls)], "finish": finish}

    with client.chat.completions.stream(**args) as s:
        events = [e.type for e in s]
        final = s.get_final_completion()
    out["helper"] = {"calls": calls_of(final.choices[0].message), "finish": final.choices[0].finish_reason,
                     "events": sorted(set(events))}

    try:
        client.chat.completions.create(**{**args, "model": "stories260K"})
        out["no_tool_support"] = None
    except openai.BadRequestError as e:
        out["no_tool_support"] = {"status": e.status_code, "param": getattr(e, "param", None)}
    print(json.dumps(out))


if __name__ == "__main__":
    main()
