#!/usr/bin/env python3
"""Writes N generated tool contracts for the start-up benchmark (bench/run.sh).

    gen_contracts.py DIR N [UPSTREAM]

Every contract is as realistic as bench/contracts/demo.yaml (the same input and output schemas,
each with a pattern and an enum), alternating between the demo upstream's `weather` and `add`
tools, spread over files of 100 tools each. JSON is valid YAML, so each file is JSON.
"""
import json
import os
import sys

WEATHER = {
    "upstream_tool": "weather",
    "description": "Current weather for one of the supported cities.",
    "privilege": "read",
    "side_effects": "none",
    "timeout": "5s",
    "rate": "100000/s",
    "input": {
        "type": "object",
        "properties": {
            "location": {
                "type": "string",
                "description": "City name, capitalised.",
                "enum": ["Chicago", "New York", "Los Angeles"],
                "pattern": "^[A-Z][a-z]+( [A-Z][a-z]+)*$",
                "maxLength": 32,
            }
        },
        "required": ["location"],
        "additionalProperties": False,
    },
    "output": {
        "type": "object",
        "properties": {
            "temperature": {"type": "number", "minimum": -60, "maximum": 60},
            "conditions": {"type": "string", "maxLength": 64, "pattern": "^[A-Za-z ]+$"},
            "humidity": {"type": "number", "minimum": 0, "maximum": 100},
        },
        "required": ["temperature", "conditions", "humidity"],
        "additionalProperties": False,
    },
}

ADD = {
    "upstream_tool": "add",
    "description": "Adds two amounts of one currency, for an invoice reference.",
    "privilege": "read",
    "timeout": "5s",
    "rate": "100000/s",
    "input": {
        "type": "object",
        "properties": {
            "a": {"type": "number", "minimum": -1000000, "maximum": 1000000},
            "b": {"type": "number", "minimum": -1000000, "maximum": 1000000},
            "currency": {"type": "string", "enum": ["USD", "EUR", "GBP", "JPY", "CHF"]},
            "reference": {"type": "string", "pattern": "^INV-[0-9]{4}-[0-9]{6}$"},
            "note": {"type": "string", "maxLength": 200},
            "tags": {
                "type": "array",
                "items": {"type": "string", "pattern": "^[a-z][a-z0-9-]{0,15}$"},
                "maxItems": 5,
                "uniqueItems": True,
            },
        },
        "required": ["a", "b", "currency", "reference"],
        "additionalProperties": False,
    },
    "output": {
        "type": "object",
        "properties": {"sum": {"type": "number", "minimum": -2000000, "maximum": 2000000}},
        "required": ["sum"],
        "additionalProperties": False,
    },
}


def main() -> None:
    out, n = sys.argv[1], int(sys.argv[2])
    upstream = sys.argv[3] if len(sys.argv) > 3 else "demo"
    os.makedirs(out, exist_ok=True)
    per_file = 100
    for f in range((n + per_file - 1) // per_file):
        tools = {}
        for i in range(f * per_file, min(n, (f + 1) * per_file)):
            base = WEATHER if i % 2 == 0 else ADD
            tool = dict(base)
            tool["title"] = f"Generated tool {i}"
            tools[f"t{i:04d}_{base['upstream_tool']}"] = tool
        with open(os.path.join(out, f"gen{f:03d}.yaml"), "w") as fh:
            json.dump({"upstream": upstream, "tools": tools}, fh, indent=1)


if __name__ == "__main__":
    main()
