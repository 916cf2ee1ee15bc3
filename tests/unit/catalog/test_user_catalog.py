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


QWEN3_MOE = {  # Qwen3-30B-A3B's config.json, the keys import-hf reads
    "model_type": "qwen3_moe",
    "attention_bias": False,
    "decoder_sparse_step": 1,
    "mlp_only_layers": [],
    "head_dim": 128,
    "hidden_size": 2048,
    "intermediate_size": 6144,
    "moe_intermediate_size": 768,
    "num_attention_heads": 32,
    "num_key_value_heads": 4,
    "num_experts": 128,
    "num_experts_per_tok": 8,
    "num_hidden_layers": 48,
    "vocab_size": 151936,
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
}
LLAMA4_SCOUT = {  # a multimodal config: the text model's keys under text_config
    "model_type": "llama4",
    "tie_word_embeddings": False,
    "text_config": {
        "model_type": "llama4_text",
        "hidden_size": 5120,
        "intermediate_size": 8192,
        "intermediate_size_mlp": 16384,
        "num_attention_heads": 40,
        "num_key_value_heads": 8,
        "head_dim": 128,
        "num_hidden_layers": 48,
        "num_local_experts": 16,
        "num_experts_per_tok": 1,
        "interleave_moe_layer_step": 1,
        "attention_chunk_size": 8192,
        "vocab_size": 202048,
        "torch_dtype": "bfloat16",
    },
}

MAVERICK_TEXT = LLAMA4_SCOUT["text_config"] | {"num_local_experts": 128, "interleave_moe_layer_step": 2}
LLAMA4_MAVERICK = LLAMA4_SCOUT | {"text_config": MAVERICK_TEXT}


@pytest.mark.parametrize(
    ("cfg", "total", "active", "experts"),
    [
        (QWEN3_MOE, 30.5e9, 3.3e9, 128),  # Qwen: 30.5B total, 3.3B activated
        (  # Qwen3-235B-A22B: 235B, 22B
            {**QWEN3_MOE, "hidden_size": 4096, "moe_intermediate_size": 1536, "num_attention_heads": 64}
            | {"num_hidden_layers": 94},
            235e9,
            22e9,
            128,
        ),
        (  # Qwen2-57B-A14B: one shared expert of its own width, q/k/v biases; 57B, 14B
            {**QWEN3_MOE, "model_type": "qwen2_moe", "hidden_size": 3584, "intermediate_size": 18944}
            | {"moe_intermediate_size": 2560, "shared_expert_intermediate_size": 20480, "num_experts": 64}
            | {"num_attention_heads": 28, "num_hidden_layers": 28, "head_dim": 128},
            57.4e9,
            14.2e9,
            64,
        ),
        (LLAMA4_SCOUT, 107.8e9, 17.2e9, 16),  # Meta: 109B with the vision encoder, 17B active
        (LLAMA4_MAVERICK, 400.7e9, 17.2e9, 128),  # every other layer MoE, dense ones wider; 400B, 17B
        (  # the same model as newer configs write it: the MoE layers listed
            LLAMA4_MAVERICK | {"text_config": MAVERICK_TEXT | {"moe_layers": list(range(1, 48, 2))}},
            400.7e9,
            17.2e9,
            128,
        ),
    ],
)
def test_import_hf_reads_each_moe_familys_own_keys(
    tmp_path, cfg: dict, total: float, active: float, experts: int
) -> None:
    _, e = model_entry_from_hf(_config(tmp_path, **cfg), "moe")
    assert e["params"] == pytest.approx(total, rel=0.01)
    assert e["active_params"] == pytest.approx(active, rel=0.02)
    assert e["experts"] == experts


QWEN3_235B = QWEN3_MOE | {"hidden_size": 4096, "intermediate_size": 12288, "moe_intermediate_size": 1536}
QWEN3_235B |= {"num_attention_heads": 64, "num_hidden_layers": 94}
GPT_OSS_120B = {
    "model_type": "gpt_oss",
    "attention_bias": True,
    "head_dim": 64,
    "hidden_size": 2880,
    "intermediate_size": 2880,
    "num_attention_heads": 64,
    "num_key_value_heads": 8,
    "num_hidden_layers": 36,
    "num_local_experts": 128,
    "num_experts_per_tok": 4,
    "vocab_size": 201088,
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
    "sliding_window": 128,
    "layer_types": ["sliding_attention", "full_attention"] * 18,
}


@pytest.mark.parametrize(
    ("name", "cfg"),
    [
        ("qwen3-30b-a3b", QWEN3_MOE),
        ("qwen3-235b-a22b", QWEN3_235B),
        ("llama4-scout", LLAMA4_SCOUT),
        ("llama4-maverick", LLAMA4_MAVERICK),
        ("gpt-oss-120b", GPT_OSS_120B),
        ("gpt-oss-20b", GPT_OSS_120B | {"num_hidden_layers": 24, "num_local_experts": 32}),
    ],
)
def test_the_shipped_moe_entries_are_what_import_hf_computes(tmp_path, name: str, cfg: dict) -> None:
    _, e = model_entry_from_hf(_config(tmp_path, **cfg), name)
    shipped = get_model(name)
    for field in ("layers", "hidden", "heads", "kv_heads", "head_dim", "ffn_hidden", "vocab", "experts"):
        assert getattr(shipped, field) == e[field], field
    assert shipped.experts_per_token == e["experts_per_token"]
    assert shipped.params == pytest.approx(e["params"], rel=1e-4)
    assert shipped.active_params == pytest.approx(e["active_params"], rel=1e-4)


@pytest.mark.parametrize(
    ("cfg", "message"),
    [
        (  # an expert count under a key no family here uses
            {k: v for k, v in QWEN3_MOE.items() if k != "num_experts"} | {"num_routed_experts_total": 128},
            r"num_routed_experts_total: expert settings import-hf does not read",
        ),
        (  # Jamba's experts sit on every other layer, by keys read nowhere here
            QWEN3_MOE | {"expert_layer_period": 2, "expert_layer_offset": 1},
            r"expert_layer_period: expert settings import-hf does not read",
        ),
        (  # routed experts per token, and no count of them
            {k: v for k, v in QWEN3_MOE.items() if k != "num_experts"},
            r"num_experts_per_tok names routed experts, but no expert count",
        ),
    ],
)
def test_import_hf_refuses_experts_it_cannot_count(tmp_path, cfg: dict, message: str) -> None:
    with pytest.raises(InputError, match=message):
        model_entry_from_hf(_config(tmp_path, **cfg))


def test_import_hf_refuses_moe_layers_beyond_the_model(tmp_path) -> None:
    with pytest.raises(InputError, match="moe_layers must be a list of layer indices below 48"):
        model_entry_from_hf(
            _config(
                tmp_path, **LLAMA4_SCOUT | {"text_config": LLAMA4_SCOUT["text_config"] | {"moe_layers": [48]}}
            )
        )


@pytest.mark.parametrize(
    ("extra", "said"),
    [
        (
            {"sliding_window": 128, "layer_types": ["sliding_attention", "full_attention"] * 16},
            "16 of 32 layers",
        ),
        ({"sliding_window": 4096}, "sliding_window = 4096"),
        ({"attention_chunk_size": 8192}, "attention_chunk_size = 8192"),
        ({"sliding_window": 131072, "use_sliding_window": False}, None),
        ({"sliding_window": None}, None),
    ],
)
def test_import_hf_says_when_windowed_attention_is_counted_as_full(
    tmp_path, extra: dict, said: str | None
) -> None:
    from splitplan.api import catalog_import_hf

    imported = catalog_import_hf(_config(tmp_path, **LLAMA8B | extra), "m")
    if said is None:
        assert imported.notes == ()
        assert "full attention" not in imported.entry["source"]
    else:
        (note,) = imported.notes
        assert said in note
        assert "overstates the KV" in note
        assert note in imported.entry["source"]
