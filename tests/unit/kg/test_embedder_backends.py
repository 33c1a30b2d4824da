"""The embedding paths: graphs exported once from the bundled model into a verified cache, ONNX Runtime's
float32 and int8 runs and AOTInductor's compiled package against torch's float32 vectors, the per-CPU
choice and the settings that cannot run."""

from __future__ import annotations

import json
import logging
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from kg import embedding_paths
from kg.embedder_backends import GRAPHS, ExportCache, GraphTokenizer
from kg.embedders import EmbedderError, EmbeddingPath, TextEmbedder, check_path, resolve_model_path, resolve_path
from kg.embedding_paths import cpu_features
from kg.settings import DEFAULT_EMBEDDING_MODEL, SettingsError, load_settings

# real sentences of the kind medkg embeds: an abstract's passage, a question, an HPO term as the entity
# index words it
TEXTS = [
    "Marfan syndrome is an autosomal dominant disorder of connective tissue caused by mutations in FBN1; "
    "aortic root dilatation and ectopia lentis are its cardinal features.",
    "Which drugs are used for hypertension?",
    "Seizure: a seizure is an intermittent abnormality of nervous system physiology characterised by a "
    "transient occurrence of signs and/or symptoms due to abnormal excessive neuronal activity in the brain. "
    "Synonyms: Epileptic seizure, Seizures.",
    "Metformin reduced HbA1c by 1.1% compared with placebo in adults with type 2 diabetes.",
]


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory: pytest.TempPathFactory):  # noqa: ANN201 - a Path
    return tmp_path_factory.mktemp("embedders")


@pytest.fixture(scope="module")
def reference() -> np.ndarray:
    return TextEmbedder(DEFAULT_EMBEDDING_MODEL, path=EmbeddingPath("torch", "float32")).encode(TEXTS)


def _embedder(cache_dir, backend: str, dtype: str, graph: str) -> TextEmbedder:  # noqa: ANN001
    return TextEmbedder(DEFAULT_EMBEDDING_MODEL, path=EmbeddingPath(backend, dtype, graph), cache_dir=cache_dir)


def test_onnx_float32_gives_torchs_vectors_and_keeps_the_signature(cache_dir, reference) -> None:  # noqa: ANN001
    embedder = _embedder(cache_dir, "onnx", "float32", "O3")
    vectors = embedder.encode(TEXTS)
    assert vectors.shape == reference.shape and vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert np.min(np.sum(vectors * reference, axis=1)) > 0.9999
    # the same vectors to float rounding: indexes embedded by torch float32 stay valid
    assert embedder.signature == DEFAULT_EMBEDDING_MODEL
    assert {g for g in GRAPHS if embedder.export_cache.valid(g)} >= {"float32", "O3"}  # O3 from the traced graph


def test_int8_holds_the_quality_bar_and_has_its_own_signature(cache_dir, reference, caplog) -> None:  # noqa: ANN001
    embedder = _embedder(cache_dir, "onnx", "int8", "O2-int8")
    with caplog.at_level(logging.INFO):
        embedder.encode(TEXTS[:1])  # builds O2 and O2-int8: ONNX Runtime's notes on each node are not shown
    assert {"O2", "O2-int8"} <= set(embedder.export_cache.built)
    assert not [r for r in caplog.records if "onnxruntime" in r.pathname], caplog.text[:500]
    cosines = np.sum(embedder.encode(TEXTS) * reference, axis=1)
    assert cosines.mean() >= 0.99 and cosines.min() >= 0.97, cosines
    assert embedder.signature == f"{DEFAULT_EMBEDDING_MODEL}@onnx-int8"
    # dynamic quantisation scales activations per batch, so a text's vector depends a little on its batch
    # (a question is embedded alone, passages in batches): within the same bar
    single = np.vstack([embedder.encode([t]) for t in TEXTS])
    assert np.sum(single * embedder.encode(TEXTS), axis=1).min() >= 0.97


def test_a_damaged_or_half_written_graph_is_built_again(cache_dir, reference) -> None:  # noqa: ANN001
    first = _embedder(cache_dir, "onnx", "float32", "O3")
    first.encode(TEXTS[:1])
    cache: ExportCache = first.export_cache
    graph = cache.path("O3")
    graph.write_bytes(graph.read_bytes()[: graph.stat().st_size // 2])  # a crash mid-write, or a bad disk
    assert not cache.valid("O3")
    again = _embedder(cache_dir, "onnx", "float32", "O3")
    assert np.min(np.sum(again.encode(TEXTS) * reference, axis=1)) > 0.9999
    assert again.export_cache.built == ["O3"]  # only the damaged graph; its sources verified and kept
    assert cache.valid("O3")
    # a graph whose record is gone (killed between the file and its record) is not trusted either
    cache = again.export_cache  # the full load's (the first process may have run its graph alone: it cannot build)
    cache._record("float32").unlink()
    assert not cache.valid("float32")
    assert cache.graph("float32") == cache.path("float32") and cache.valid("float32")


def test_the_cache_belongs_to_one_model(cache_dir) -> None:  # noqa: ANN001
    import torch

    embedder = _embedder(cache_dir, "onnx", "float32", "O3")
    embedder.encode(TEXTS[:1])
    model = TextEmbedder(DEFAULT_EMBEDDING_MODEL, path=EmbeddingPath("torch", "float32"))._load()
    before = embedder.export_cache.directory
    assert ExportCache(model, DEFAULT_EMBEDDING_MODEL, cache_dir).directory == before
    with torch.no_grad():
        next(model.parameters()).add_(1e-3)  # other weights: another model, another cache folder
    try:
        assert ExportCache(model, DEFAULT_EMBEDDING_MODEL, cache_dir).directory != before
    finally:
        with torch.no_grad():
            next(model.parameters()).sub_(1e-3)


TRICKY = ["  fever  ", "", "Crème brûlée, naïve café 中文 😀", " ".join(TEXTS * 20), "Seizure\tand\nmicrocephaly", "a"]


def test_the_graph_tokenizer_gives_the_models_own_inputs() -> None:
    model = TextEmbedder(DEFAULT_EMBEDDING_MODEL, path=EmbeddingPath("torch", "float32"))._load()
    tokenizer = GraphTokenizer.of(Path(resolve_model_path(DEFAULT_EMBEDDING_MODEL)[0]))
    assert tokenizer is not None
    for batch in (TRICKY, TRICKY[:1], TRICKY[3:5], [""]):  # cut at 256 tokens, padded to the longest
        theirs, ours = model.preprocess(batch), tokenizer(batch)
        for name in ("input_ids", "attention_mask", "token_type_ids"):
            assert np.array_equal(theirs[name].numpy(), ours[name]), (name, batch)


def test_a_folder_that_is_not_a_plain_text_model_gets_no_graph_tokenizer(tmp_path: Path) -> None:
    folder = Path(resolve_model_path(DEFAULT_EMBEDDING_MODEL)[0])
    for name in ("modules.json", "sentence_bert_config.json", "tokenizer_config.json", "tokenizer.json"):
        shutil.copy(folder / name, tmp_path / name)
    assert GraphTokenizer.of(tmp_path) is not None
    modules = json.loads((tmp_path / "modules.json").read_text())
    dense = {"idx": 3, "name": "3", "path": "3_Dense", "type": "sentence_transformers.models.Dense"}
    (tmp_path / "modules.json").write_text(json.dumps([*modules, dense]))  # a layer the graph holds, not we
    assert GraphTokenizer.of(tmp_path) is None
    (tmp_path / "modules.json").write_text(json.dumps(modules))
    (tmp_path / "tokenizer.json").write_text("{damaged")
    assert GraphTokenizer.of(tmp_path) is None


ALONE = """
import json, sys
from pathlib import Path
from kg.embedders import EmbeddingPath, TextEmbedder
from kg.settings import DEFAULT_EMBEDDING_MODEL
texts = json.loads(sys.argv[2])
e = TextEmbedder(DEFAULT_EMBEDDING_MODEL, path=EmbeddingPath("onnx", "int8", "O2-int8"), cache_dir=Path(sys.argv[1]))
vectors = e.encode(texts).tolist()
print(json.dumps({"imported": sorted({"torch", "sentence_transformers", "transformers"} & set(sys.modules)),
                  "alone": e._load() is None, "vectors": vectors, "tokens": e.count_tokens(texts)}))
"""


def test_a_cached_graph_runs_without_torch_and_gives_the_same_vectors(cache_dir) -> None:  # noqa: ANN001
    """A process whose graph is cached loads ONNX Runtime and the model's tokenizer alone (a command that
    embeds starts ~8 s sooner on 2 cores), and its vectors and token counts are those of the full load."""
    for link in cache_dir.glob("*-files-*.json"):  # what names the graphs' folder by the model's files
        link.unlink()
    full = _embedder(cache_dir, "onnx", "int8", "O2-int8")  # so this loads the model, verifies the graph, and
    vectors, tokens = full.encode(TRICKY), full.count_tokens(TRICKY)  # names the folder again
    assert full._load() is not None and len(list(cache_dir.glob("*-files-*.json"))) == 1
    run = subprocess.run(
        [sys.executable, "-c", ALONE, str(cache_dir), json.dumps(TRICKY)], capture_output=True, text=True, check=False
    )
    assert run.returncode == 0, run.stderr[-3000:]
    alone = json.loads(run.stdout.splitlines()[-1])
    assert alone["alone"] and alone["imported"] == [], alone["imported"]
    assert np.allclose(np.array(alone["vectors"], dtype=np.float32), vectors, atol=1e-6)
    assert alone["tokens"] == tokens


def test_aotinductor_compiles_the_model_once_and_gives_its_vectors(cache_dir, reference) -> None:  # noqa: ANN001
    if not embedding_paths._cxx_compiler():
        pytest.skip("no C++ compiler here: AOTInductor cannot build its package (auto takes another path)")
    embedder = _embedder(cache_dir, "inductor", "float32", "aoti-float32")
    vectors = embedder.encode(TEXTS)
    assert embedder.export_cache.built == ["aoti-float32"]
    assert embedder.export_cache.path("aoti-float32").suffix == ".pt2" and embedder.export_cache.valid("aoti-float32")
    assert vectors.shape == reference.shape and vectors.dtype == np.float32
    assert np.min(np.sum(vectors * reference, axis=1)) > 0.9999
    assert embedder.signature == DEFAULT_EMBEDDING_MODEL  # float32: torch's vectors, indexes stay valid
    # batches of other sizes and lengths than the one it was exported with; a text cut at the model's limit
    longest = " ".join(TEXTS * 20)
    alone = np.vstack([embedder.encode([t]) for t in [*TEXTS, longest]])
    assert np.min(np.sum(alone[:-1] * vectors, axis=1)) > 0.9999
    torch_f32 = TextEmbedder(DEFAULT_EMBEDDING_MODEL, path=EmbeddingPath("torch", "float32"))
    assert np.sum(alone[-1] * torch_f32.encode([longest])[0]) > 0.9999
    # another process loads the package: nothing is compiled again
    again = _embedder(cache_dir, "inductor", "float32", "aoti-float32")
    assert np.allclose(again.encode(TEXTS), vectors, atol=1e-6) and again.export_cache.built == []


def test_the_path_is_chosen_by_the_cpu() -> None:
    path = resolve_path("auto", "auto")
    amx = cpu_features()["amx"]
    assert path.dtype == ("bfloat16" if amx else "int8")
    assert path.backend in (("torch", "openvino") if amx else ("onnx",))  # AOTInductor only when asked for
    assert path.reason
    assert resolve_path("auto", "float32") == EmbeddingPath("torch", "float32", None, "asked for float32")
    assert resolve_path("onnx", "int8").graph == "O2-int8"
    assert resolve_path("auto", "auto", device="cuda").backend == "torch"


@pytest.mark.parametrize(
    ("backend", "dtype", "device", "message"),
    [
        ("tensorrt", "auto", "cpu", "must be one of"),
        ("auto", "float8", "cpu", "dtype must be"),
        ("auto", "float16", "cpu", "float16 embeddings run on a GPU"),
        ("onnx", "bfloat16", "cpu", "runs float32 or int8"),
        ("onnx", "auto", "cuda", "CPU only"),
        ("torch", "int8", "cuda", "int8 embeddings run on the onnx backend"),
        ("inductor", "int8", "cpu", "runs float32 or bfloat16"),
        ("inductor", "auto", "cuda", "CPU only"),
    ],
)
def test_settings_that_cannot_run_are_refused(backend: str, dtype: str, device: str, message: str) -> None:
    with pytest.raises(EmbedderError, match=message):
        check_path(backend, dtype, device)


_XEON_AMX = {"avx512": True, "avx512_vnni": True, "bf16": True, "amx": True}
_ZEN4 = {"avx512": True, "avx512_vnni": True, "bf16": True, "amx": False}
_ZEN3 = {"avx512": False, "avx512_vnni": False, "bf16": False, "amx": False}


@pytest.mark.parametrize(
    ("cpu", "installed", "dtype", "expected"),
    [
        (_XEON_AMX, {"onnx", "openvino"}, "auto", ("openvino", "bfloat16")),
        (_XEON_AMX, {"onnx"}, "auto", ("torch", "bfloat16")),
        (_ZEN4, {"onnx", "openvino"}, "auto", ("onnx", "int8")),  # int8 2.69x against OpenVINO bf16's 2.41x
        (_ZEN4, set(), "auto", ("torch", "bfloat16")),
        (_ZEN4, {"onnx", "openvino"}, "bfloat16", ("openvino", "bfloat16")),
        (_ZEN3, {"onnx", "openvino"}, "auto", ("onnx", "int8")),
        (_ZEN3, set(), "auto", ("torch", "float32")),
        (_ZEN3, {"onnx"}, "bfloat16", ("torch", "bfloat16")),
    ],
    ids=["amx", "amx-no-openvino", "zen4", "zen4-no-onnxruntime", "zen4-asked-bf16", "avx2", "avx2-bare", "avx2-bf16"],
)
def test_auto_takes_the_fastest_path_measured_on_each_cpu_kind(
    monkeypatch: pytest.MonkeyPatch, cpu: dict, installed: set, dtype: str, expected: tuple
) -> None:
    """bfloat16 where AMX multiplies bf16 tiles; int8 on ONNX Runtime everywhere else, AVX-512 bf16 without
    AMX included (docs/benchmarks.md#embedding-backends); the CPU read from its flags, not from torch."""
    from kg import embedding_paths

    features = {"model": "test", "flags": True, "cores": 2, "avx2": True, **cpu}
    monkeypatch.setattr(embedding_paths, "cpu_features", lambda: features)
    monkeypatch.setattr(embedding_paths, "_available", lambda backend: backend == "torch" or backend in installed)
    path = resolve_path("auto", dtype)
    assert (path.backend, path.dtype) == expected and path.reason


@pytest.mark.parametrize(("bf16", "expected"), [(True, "bfloat16"), (False, "float16")])
def test_a_gpu_embeds_in_half_precision(monkeypatch: pytest.MonkeyPatch, bf16: bool, expected: str) -> None:
    """MEDKG_EMBEDDING_DEVICE=cuda: bfloat16 on GPUs that have it (A100, H100, H200), else float16; the
    batches grow to 512 texts (sorted by length by sentence-transformers, so each pads little)."""
    from kg import embedding_paths
    from kg.embedders import build_embedder

    monkeypatch.setattr(embedding_paths, "_accelerator_bf16", lambda device: bf16)
    path = resolve_path("auto", "auto", device="cuda")
    assert (path.backend, path.dtype) == ("torch", expected) and path.suffix == f"@{expected}"
    assert resolve_path("torch", "float32", device="cuda:1").dtype == "float32"
    embedder = build_embedder(load_settings(embedding_device="cuda"))
    assert (embedder.device, embedder.dtype, embedder.batch_size) == ("cuda", expected, 512)
    assert build_embedder(load_settings(embedding_device="cuda", embedding_batch_size=2048)).batch_size == 2048
    assert build_embedder(load_settings()).batch_size == 16


def test_without_a_cxx_compiler_inductor_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(embedding_paths, "_cxx_compiler", lambda: None)
    with pytest.raises(EmbedderError, match="needs a C.. compiler"):
        check_path("inductor", "auto")


def test_the_settings_refuse_them_at_start(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEDKG_EMBEDDING_BACKEND", "onnx")
    monkeypatch.setenv("MEDKG_EMBEDDING_DTYPE", "bfloat16")
    with pytest.raises(SettingsError, match="MEDKG_EMBEDDING_BACKEND/MEDKG_EMBEDDING_DTYPE"):
        load_settings()
