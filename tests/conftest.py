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


# a small measurement table in the measurement schema (the reader's own columns and its three
# optional ones): two engines' worth of prompt, token and static-batch rows
MEASUREMENT_ROWS = (
    "eng,llama2-7b,a100-80gb,1,fp16,prompt,1,192,,,24,no,,\n"
    "eng,llama2-7b,a100-80gb,1,fp16,prompt,1,1536,,,117,no,,\n"
    "eng,llama2-7b,a100-80gb,1,fp16,token,8,,8000,,12,no,,\n"
    "eng,llama2-7b,a100-80gb,1,fp16,static_batch,64,192,,128,2400,no,,\n"
    "eng,llama2-70b,h100-80gb,4,fp8,prompt,1,192,,,33,no,,\n"
    "eng,llama2-70b,h100-80gb,4,fp8,prompt,1,1536,,,97,no,,\n"
    "eng,llama2-70b,h100-80gb,4,fp8,token,64,,64000,,20,no,,\n"
    "eng,llama2-70b,h100-80gb,4,fp8,static_batch,64,1536,,128,17000,no,,\n"
)


@pytest.fixture(scope="session")
def measurement_header() -> str:
    from splitplan.perf.measurements import MEASUREMENT_COLUMNS

    return ",".join((*MEASUREMENT_COLUMNS, "estimated", "derivation", "notes")) + "\n"


@pytest.fixture
def measurement_table(tmp_path: Path, measurement_header: str) -> Path:
    """MEASUREMENT_ROWS written as a CSV under the test's folder."""
    f = tmp_path / "m.csv"
    f.write_text(measurement_header + MEASUREMENT_ROWS)
    return f


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
