"""Shared by the Python tests (tests/python, run by ctest: python3 -m unittest with PYTHONPATH=build/python).

TRAINSIM_BIN is the CLI, TRAINSIM_SOURCE_DIR the repository root; the tests run from the root, so that the paths
below are the ones the CLI tests use."""

import json
import os
import subprocess

SOURCE_DIR = os.environ.get("TRAINSIM_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
TRAINSIM_BIN = os.environ.get("TRAINSIM_BIN", os.path.join(SOURCE_DIR, "build", "trainsim"))

# The small configuration of the CLI's golden tests: 8 layers, hidden 1024, TP 2 x PP 2 x DP 4 on 16 A100.
TOPOLOGY = "topologies/dgx-a100.json"
WORKLOAD = "tests/e2e/data/small.json"
NODES = {"topology.nodes": 2}


def src(path):
    return os.path.join(SOURCE_DIR, path)


def cli(*args):
    """Runs the CLI from the repository root; (exit code, stdout, stderr)."""
    p = subprocess.run([TRAINSIM_BIN, *args], cwd=SOURCE_DIR, capture_output=True, text=True)
    return p.returncode, p.stdout, p.stderr


def cli_json(*args, ok_codes=(0,)):
    """The --json document the CLI prints for args (raw text and parsed)."""
    code, out, err = cli(*args, "--json")
    if code not in ok_codes:
        raise AssertionError(f"trainsim {' '.join(args)} --json: exit {code}: {err}")
    return out, json.loads(out)


def dumped(doc):
    """doc written as the CLI writes JSON (nlohmann::json::dump(2)): compared byte for byte with its stdout."""
    return json.dumps(doc, indent=2, ensure_ascii=False) + "\n"
