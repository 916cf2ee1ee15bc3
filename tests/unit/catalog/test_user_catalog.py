"""User catalogs: folders of TOML files in the shipped schema add or override entries; bad files
are one clear line; `catalog import-hf` writes a models entry from a config.json."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from splitplan.catalog import entry_origin, get_gpu, get_machine_type, get_model, list_gpus
from splitplan.catalog._load import CATALOG_ENV, clear_caches, use_user_catalogs
from splitplan.catalog.hf import add_to_catalog, model_entry_from_hf
from splitplan.errors import CatalogError, InputError

GPU = """schema_version = 1
[gpu.x200-96gb]
memory_bytes = 96e9
hbm_bytes_per_s = 4.0e12
fp16_flops = 1200e12
fp8_flops = 2400e12
tdp_w = 800
source = "lab measurements"
"""
MACHINE = """schema_version = 1
[machine.x200-8x]
gpu = "x200-96gb"
gpus = 8
cost_usd_per_h = 30.0
interconnect_bytes_per_s = 400e9
source = "negotiated price"

[machine.dgx-h100]
gpu = "h100-80gb"
gpus = 8
cost_usd_per_h = 25.0
interconnect_bytes_per_s = 400e9
source = "our H100 price"
"""


@pytest.fixture
def isolated(monkeypatch):
    monkeypatch.setenv(CATALOG_ENV, "")
    clear_caches()
    yield
    clear_caches()


def _folder(tmp_path: Path, **files: str) -> Path:
    d = tmp_path / "cat"
    d.mkdir(exist_ok=True)
    for kind, text in files.items():
        (d / f"{kind}.toml").write_text(text)
    return d


def test_a_user_folder_adds_and_overrides_entries(isolated, tmp_path) -> None:
    shipped_price = get_machine_type("dgx-h100").cost_usd_per_h
    d = _folder(tmp_path, gpus=GPU, machines=MACHINE)
    use_user_catalogs([d])
    assert get_gpu("x200-96gb").fp8_flops == 2400e12
    assert get_machine_type("x200-8x").gpu.name == "x200-96gb"
    assert get_machine_type("dgx-h100").cost_usd_per_h == 25.0 != shipped_price
    assert entry_origin("machine", "dgx-h100") == str(d.resolve() / "machines.toml")
    assert entry_origin("gpu", "h100-80gb") == "shipped"
    assert "x200-96gb" in {g.name for g in list_gpus()}


def test_the_environment_variable_names_user_folders(isolated, tmp_path, monkeypatch) -> None:
    d = _folder(tmp_path, gpus=GPU)
    monkeypatch.setenv(CATALOG_ENV, str(d))
    clear_caches()
    assert get_gpu("x200-96gb").tdp_w == 800


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (GPU.replace("tdp_w = 800\n", ""), "missing field 'tdp_w'"),
        (GPU.replace("tdp_w = 800", "tdp_w = 800\ntdp_kw = 0.8"), "unknown key 'tdp_kw'"),
        (GPU + GPU.replace("schema_version = 1\n", ""), "given twice"),
        (GPU + GPU.replace("schema_version = 1\n", "").replace("x200-96gb", "X200-96GB"), "given twice"),
        (GPU.replace("schema_version = 1", "schema_version = 2"), "schema_version must be 1"),
        (GPU + "[machine.y]\ngpu = 'x'\n", "unknown table 'machine'"),
        (GPU.replace("tdp_w = 800", "tdp_w = -1"), "tdp_w must be a positive number"),
    ],
)
def test_a_bad_catalog_file_is_one_line(isolated, tmp_path, text: str, message: str) -> None:
    d = _folder(tmp_path, gpus=text)
    use_user_catalogs([d])
    with pytest.raises(CatalogError, match=message) as err:
        get_gpu("x200-96gb")
    assert "\n" not in str(err.value)
    assert str(d) in str(err.value)


def test_a_missing_or_empty_folder_is_refused(isolated, tmp_path) -> None:
    with pytest.raises(CatalogError, match="does not exist"):
        use_user_catalogs([tmp_path / "nope"])
    with pytest.raises(CatalogError, match=r"none of gpus\.toml"):
        use_user_catalogs([tmp_path])


def test_a_machine_on_an_unknown_gpu_names_its_file(isolated, tmp_path) -> None:
    use_user_catalogs([_folder(tmp_path, machines=MACHINE)])
    with pytest.raises(CatalogError, match=r"machines\.toml.*unknown GPU 'x200-96gb'"):
        get_machine_type("x200-8x")


def _config(tmp_path: Path, **cfg) -> Path:
    p = tmp_path / "Llama-3.1-8B" / "config.json"
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(json.dumps(cfg))
    return p


LLAMA8B = {
    "model_type": "llama",
    "hidden_size": 4096,
    "intermediate_size": 14336,
    "num_attention_heads": 32,
    "num_hidden_layers": 32,
    "num_key_value_heads": 8,
    "vocab_size": 128256,
    "head_dim": 128,
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
}


def test_import_hf_computes_parameters_of_dense_moe_and_mla_models(tmp_path) -> None:
    name, e = model_entry_from_hf(_config(tmp_path, **LLAMA8B))
    assert name == "llama-3.1-8b"
    # published: 8.03B; the shipped llama3.1-8b entry has the same architecture
    assert e["params"] == pytest.approx(8.03e9, rel=2e-3) == e["active_params"]
    shipped = get_model("llama3.1-8b")
    assert (e["layers"], e["kv_heads"], e["ffn_hidden"]) == (
        shipped.layers,
        shipped.kv_heads,
        shipped.ffn_hidden,
    )
    mixtral = {
        **LLAMA8B,
        "model_type": "mixtral",
        "hidden_size": 6144,
        "intermediate_size": 16384,
        "num_attention_heads": 48,
        "num_hidden_layers": 56,
        "vocab_size": 32768,
        "num_local_experts": 8,
        "num_experts_per_tok": 2,
    }
    del mixtral["head_dim"]
    _, m = model_entry_from_hf(_config(tmp_path, **mixtral), "mx")
    assert m["params"] == pytest.approx(140.6e9, rel=2e-3)  # Mistral AI: 141B total, 39B active
    assert m["active_params"] == pytest.approx(39.1e9, rel=5e-3)
    assert (m["experts"], m["experts_per_token"], m["head_dim"]) == (8, 2, 128)
    ds = {
        "model_type": "deepseek_v3",
        "hidden_size": 7168,
        "intermediate_size": 18432,
        "moe_intermediate_size": 2048,
        "num_attention_heads": 128,
        "num_hidden_layers": 61,
        "num_key_value_heads": 128,
        "vocab_size": 129280,
        "n_routed_experts": 256,
        "n_shared_experts": 1,
        "num_experts_per_tok": 8,
        "first_k_dense_replace": 3,
        "kv_lora_rank": 512,
        "q_lora_rank": 1536,
        "qk_rope_head_dim": 64,
        "qk_nope_head_dim": 128,
        "v_head_dim": 128,
    }
    _, d = model_entry_from_hf(_config(tmp_path, **ds), "dsv3")
    assert d["params"] == pytest.approx(671e9, rel=2e-3)  # DeepSeek-V3 report: 671B total, 37B active
    assert d["active_params"] == pytest.approx(37e9, rel=0.02)
    assert d["mla_kv_dim"] == 576 == get_model("deepseek-v3").mla_kv_dim


def test_import_hf_writes_a_loadable_entry_and_refuses_duplicates(isolated, tmp_path) -> None:
    cfg = _config(tmp_path, **LLAMA8B)
    name, entry = model_entry_from_hf(cfg, "my-8b")
    out = tmp_path / "mine"
    add_to_catalog(out, name, entry)
    use_user_catalogs([out])
    m = get_model("my-8b")
    assert m.params == pytest.approx(entry["params"], rel=1e-6)
    assert entry_origin("model", "my-8b").endswith("models.toml")
    with pytest.raises(InputError, match="already has model 'my-8b'"):
        add_to_catalog(out, name, entry)


@pytest.mark.parametrize(
    ("cfg", "message"),
    [
        ({**LLAMA8B, "num_hidden_layers": 0}, "num_hidden_layers must be a positive integer"),
        ({k: v for k, v in LLAMA8B.items() if k != "hidden_size"}, "hidden_size must be"),
        ({**LLAMA8B, "intermediate_size": None}, "intermediate_size"),
    ],
)
def test_import_hf_bad_configs_are_one_line(tmp_path, cfg: dict, message: str) -> None:
    with pytest.raises(InputError, match=message):
        model_entry_from_hf(_config(tmp_path, **cfg))
    bad = tmp_path / "x.json"
    bad.write_text("{not json")
    with pytest.raises(InputError, match="is not JSON"):
        model_entry_from_hf(bad)
