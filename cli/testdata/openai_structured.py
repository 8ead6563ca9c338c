"""Structured output through the official openai Python client, checked
with the jsonschema package (both pinned in build/scripts/openai-requirements.txt).

cli/serve_clients_test.go runs it against a started `anechat serve`:

    python openai_structured.py BASE_URL TOKEN MODEL WORKLOAD.jsonl

For every line of the workload ({"id", "prompt", "schema"}) it asks for a
reply under the schema (response_format json_schema, strict), whole and
streamed, and json_object once. It prints one JSON object: per line the
reply, its finish reason, whether it parsed and validated (and why not), and
whether the streamed text equals the whole reply; the Go test wants every
reply finished, parsed and valid (json_object's free-form object may run to
max_tokens: then it must at least start as an object).
"""

import importlib.metadata
import json
import sys

import jsonschema
from openai import OpenAI


def check(text, schema):
    """None when text is JSON valid under schema, else why not."""
    try:
        value = json.loads(text)
    except ValueError as e:
        return f"not JSON: {e}"
    try:
        jsonschema.validate(value, schema)
    except jsonschema.ValidationError as e:
        return f"invalid: {e.message}"
    return None


def main():
    base, token, model, workload = sys.argv[1:5]
    client = OpenAI(base_url=base, api_key=token, max_retries=0)
    out = {"jsonschema": importlib.metadata.version("jsonschema"), "lines": []}
    with open(workload, encoding="utf-8") as f:
        lines = [json.loads(line) for line in f if line.strip()]
    for line in lines:
        fmt = {"type": "json_schema", "json_schema": {"name": line["id"], "schema": line["schema"], "strict": True}}
        msgs = [{"role": "user", "content": line["prompt"]}]
        r = client.chat.completions.create(model=model, messages=msgs, max_tokens=200, temperature=0, response_format=fmt)
        text = r.choices[0].message.content
        pieces = []
        for chunk in client.chat.completions.create(
            model=model, messages=msgs, max_tokens=200, temperature=0, response_format=fmt, stream=True
        ):
            for c in chunk.choices:
                if c.delta.content:
                    pieces.append(c.delta.content)
        out["lines"].append(
            {
                "id": line["id"],
                "content": text,
                "finish": r.choices[0].finish_reason,
                "error": check(text, line["schema"]),
                "streamed_same": "".join(pieces) == text,
            }
        )
    # json_object: any JSON object.
    r = client.chat.completions.create(
        model=model,
        messages=[{"role": "user", "content": "Describe Lily as a JSON object."}],
        max_tokens=200,
        temperature=0,
        response_format={"type": "json_object"},
    )
    text = r.choices[0].message.content
    out["json_object"] = {"content": text, "finish": r.choices[0].finish_reason, "error": check(text, {"type": "object"})}
    print(json.dumps(out))


if __name__ == "__main__":
    main()
