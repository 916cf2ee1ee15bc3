"""Names people type: a chip's short name picks its one machine, a name several machines share is
refused with their names, a typo gets the closest names, and one machine named twice in a search
is refused rather than searched as two."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from splitplan.catalog import get_gpu, get_machine_type, get_model
from splitplan.catalog._load import CATALOG_ENV, clear_caches, use_user_catalogs
from splitplan.design import get_design
from splitplan.errors import CatalogError, InputError
from splitplan.search.problem import PoolSpace


@pytest.mark.parametrize(
    ("name", "machine"),
    [
        ("h200", "hgx-h200"),
        ("H100", "dgx-h100"),
        ("a100", "dgx-a100"),
        ("mi300x", "mi300x-8x"),
        ("l40s", "l40s-8x"),
        ("b200", "hgx-b200"),
        ("h100-80gb", "dgx-h100"),  # a GPU's full name: its machine, as before
        ("DGX-A100", "dgx-a100"),
    ],
)
def test_a_chips_short_name_picks_its_machine(name: str, machine: str) -> None:
    assert get_machine_type(name).name == machine


@pytest.mark.parametrize(("name", "several"), [("80gb", "dgx-a100, dgx-h100"), ("dgx", "dgx-a100, dgx-h100")])
def test_a_short_name_of_several_machines_is_refused_with_their_names(name: str, several: str) -> None:
    with pytest.raises(CatalogError, match=rf"'{name}' names several machine types \({several}\)"):
        get_machine_type(name)


def test_a_user_machine_on_the_same_chip_makes_its_short_name_ambiguous(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv(CATALOG_ENV, "")
    clear_caches()
    try:
        d = tmp_path / "cat"
        d.mkdir()
        (d / "machines.toml").write_text(
            'schema_version = 1\n[machine.box-4x]\ngpu = "H200-141GB"\ngpus = 4\ncost_usd_per_h = 26.0\n'
            'interconnect_bytes_per_s = 400e9\nsource = "our price"\n'
        )
        use_user_catalogs([d])
        with pytest.raises(CatalogError, match=r"several machine types \(box-4x, hgx-h200\)"):
            get_machine_type("h200")
        assert get_machine_type("box-4x").gpus == 4
    finally:
        clear_caches()


@pytest.mark.parametrize(
    ("lookup", "typo", "suggested"),
    [
        (get_model, "llama-3-70b", "'llama3-70b'"),
        (get_model, "Llama3.1-70B-Instruct", "'llama3.1-70b'"),
        (get_design, "splitwise-h", "'splitwise-hh'"),
        (get_machine_type, "dgx-h10", "'dgx-h100'"),
        (get_gpu, "h200-141", "'h200-141gb'"),
    ],
)
def test_a_typo_names_the_closest_known_names_first(lookup, typo: str, suggested: str) -> None:
    with pytest.raises(CatalogError) as err:
        lookup(typo)
    message = str(err.value)
    assert "\n" not in message
    assert message.startswith(f"unknown {message.split()[1]}")
    guess, known = message.split("(known: ")
    first = re.search(r"did you mean ('[^']+')", guess)
    assert first is not None, message
    assert first.group(1) == suggested
    assert suggested.strip("'") in known  # the whole list still follows


def test_a_name_like_no_known_one_gets_no_guess() -> None:
    with pytest.raises(CatalogError) as err:
        get_model("gpt-9")
    assert "did you mean" not in str(err.value)
    assert "(known: bloom-176b" in str(err.value)


@pytest.mark.parametrize("names", [("h100-80gb", "dgx-h100"), ("h200", "hgx-h200"), ("a100", "A100")])
def test_one_machine_named_twice_in_a_pool_is_refused(names: tuple[str, str]) -> None:
    machine = get_machine_type(names[0]).name
    same = rf"'{names[0]}' and '{names[1]}' name the same machine type, {machine}"
    with pytest.raises(InputError, match=same):
        PoolSpace(gpus=names)
    assert PoolSpace(gpus=(names[0], "hgx-b200")).gpus == (names[0], "hgx-b200")


@settings(max_examples=300, deadline=None)
@given(
    st.text(max_size=24)
    | st.sampled_from(["h200", "a100", "80gb", "8x", "-", "", "dgx-", "-h100", "H100-80GB"])
)
def test_any_name_resolves_to_one_machine_or_is_one_line(name: str) -> None:
    """Whatever a user types picks one machine, the same one again by its own name, or is refused
    in one line."""
    refused = ""
    try:
        machine = get_machine_type(name)
    except CatalogError as exc:
        refused = str(exc)
    if refused:
        assert "\n" not in refused
    else:
        assert get_machine_type(machine.name) == machine
