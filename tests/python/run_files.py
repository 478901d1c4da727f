"""Helpers of the Python tests that read run directories or drive the CLI (one of each)."""

import csv
import json
import os

import pytest


def rows(path):
    """The rows of a run CSV file as dicts of strings."""
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def read_json(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def trainscope_cli():
    """The built `trainscope` command (TRAINSCOPE_CLI, set by ctest), or skip with the reason."""
    cli = os.environ.get("TRAINSCOPE_CLI")
    if not cli:
        pytest.skip("TRAINSCOPE_CLI (the built trainscope command) is not set")
    return cli
