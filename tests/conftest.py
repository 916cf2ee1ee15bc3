"""Shared fixtures: where ../shared is, and skips with a reason when it is absent."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("SPLITPLAN_SHARED", REPO.parent / "shared"))
PROFILE_CSV = SHARED / "reference" / "splitwise-sim" / "perf_model.csv"
REFERENCE_DIR = SHARED / "reference" / "splitwise-sim"
AZURE_DIR = SHARED / "data" / "azure-llm-2023"

os.environ.setdefault("COLUMNS", "200")  # stable rich output width in CLI tests


@pytest.fixture(scope="session")
def profile_csv() -> Path:
    if not PROFILE_CSV.is_file():
        pytest.skip(f"reference profile not found at {PROFILE_CSV}")
    return PROFILE_CSV


@pytest.fixture(scope="session")
def reference_dir() -> Path:
    if not REFERENCE_DIR.is_dir():
        pytest.skip(f"reference simulator results not found at {REFERENCE_DIR}")
    return REFERENCE_DIR


@pytest.fixture(scope="session")
def azure_dir() -> Path:
    if not AZURE_DIR.is_dir():
        pytest.skip(f"Azure traces not found at {AZURE_DIR}")
    return AZURE_DIR
