from pathlib import Path

import pytest

from kg.settings import DEFAULT_EMBEDDING_MODEL, GraphBackend, SettingsError, load_settings


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import os

    for name in list(os.environ):
        if name.startswith("MEDKG_"):
            monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)  # no stray .env file


def test_defaults_run_offline_on_the_embedded_store() -> None:
    s = load_settings()
    assert s.graph_backend is GraphBackend.ladybug
    assert s.embedding_model == DEFAULT_EMBEDDING_MODEL
    assert not s.llm_enabled
    assert s.ladybug_path == Path("data") / "graph.lbug"


def test_environment_with_prefix(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEDKG_GRAPH_BACKEND", "neo4j")
    monkeypatch.setenv("MEDKG_NEO4J_URI", "neo4j://db.internal:7687")
    monkeypatch.setenv("MEDKG_NEO4J_PASSWORD", "s3cret")
    monkeypatch.setenv("MEDKG_DATA_DIR", "/var/lib/medkg")
    s = load_settings()
    assert s.graph_backend is GraphBackend.neo4j
    assert s.neo4j_uri == "neo4j://db.internal:7687"
    assert s.neo4j_password.get_secret_value() == "s3cret"
    assert "s3cret" not in repr(s)
    assert s.data_dir == Path("/var/lib/medkg")


def test_env_file_is_read(tmp_path: Path) -> None:
    (tmp_path / ".env").write_text("MEDKG_BATCH_SIZE=123\n")
    assert load_settings().batch_size == 123


@pytest.mark.parametrize(
    ("name", "value", "fragment"),
    [
        ("MEDKG_GRAPH_BACKEND", "mongodb", "MEDKG_GRAPH_BACKEND: Input should be 'ladybug' or 'neo4j'"),
        ("MEDKG_NEO4J_URI", "http://localhost:7474", "MEDKG_NEO4J_URI: must start with one of bolt://"),
        ("MEDKG_BATCH_SIZE", "0", "MEDKG_BATCH_SIZE"),
        ("MEDKG_BATCH_SIZE", "many", "MEDKG_BATCH_SIZE"),
        ("MEDKG_LLM_BASE_URL", "ftp://llm", "MEDKG_LLM_BASE_URL: must be an http(s) URL"),
        ("MEDKG_LADYBUG_BUFFER_POOL_MB", "1", "MEDKG_LADYBUG_BUFFER_POOL_MB"),
    ],
)
def test_wrong_value_names_the_setting(monkeypatch: pytest.MonkeyPatch, name: str, value: str, fragment: str) -> None:
    monkeypatch.setenv(name, value)
    with pytest.raises(SettingsError) as info:
        load_settings()
    assert fragment in str(info.value)


def test_llm_url_needs_a_model(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEDKG_LLM_BASE_URL", "http://127.0.0.1:8000/v1")
    with pytest.raises(SettingsError, match="MEDKG_LLM_MODEL must be set"):
        load_settings()
    monkeypatch.setenv("MEDKG_LLM_MODEL", "llama")
    s = load_settings()
    assert s.llm_enabled and s.llm_base_url == "http://127.0.0.1:8000/v1"


def test_secrets_never_echoed_in_errors(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEDKG_LLM_API_KEY", "sk-very-secret")
    monkeypatch.setenv("MEDKG_LLM_BASE_URL", "http://127.0.0.1:8000/v1")
    with pytest.raises(SettingsError) as info:
        load_settings()
    assert "sk-very-secret" not in str(info.value)


def test_api_security_defaults() -> None:
    s = load_settings()
    assert s.api_keys is None
    assert s.cors_origins == "" and s.cors_origin_list == []
    assert s.max_request_bytes == 1_048_576
    assert s.rate_limit_per_minute == 120


def test_api_keys_and_cors_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    digest = "ab" * 32
    monkeypatch.setenv("MEDKG_API_KEYS", f" plain-key-1 , sha256:{digest},, ")
    monkeypatch.setenv("MEDKG_CORS_ORIGINS", "https://a.example, https://b.example")
    monkeypatch.setenv("MEDKG_RATE_LIMIT_PER_MINUTE", "0")
    s = load_settings()
    assert s.api_keys is not None
    assert s.api_keys.get_secret_value() == f"plain-key-1,sha256:{digest}"
    assert "plain-key-1" not in repr(s) and "plain-key-1" not in str(s)
    assert s.cors_origin_list == ["https://a.example", "https://b.example"]
    assert s.rate_limit_per_minute == 0


def test_blank_api_keys_mean_none(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEDKG_API_KEYS", " , ")
    assert load_settings().api_keys is None


@pytest.mark.parametrize(
    ("name", "value"),
    [("MEDKG_MAX_REQUEST_BYTES", "100"), ("MEDKG_RATE_LIMIT_PER_MINUTE", "-1")],
)
def test_wrong_api_limits_name_the_setting(monkeypatch: pytest.MonkeyPatch, name: str, value: str) -> None:
    monkeypatch.setenv(name, value)
    with pytest.raises(SettingsError, match=name):
        load_settings()


@pytest.mark.parametrize("bad", ["sha256:abc", "sha256:" + "g" * 64, "sha256:" + "a" * 65])
def test_malformed_key_digest_is_refused_without_echoing_the_keys(monkeypatch: pytest.MonkeyPatch, bad: str) -> None:
    from pydantic import ValidationError

    from kg.settings import Settings

    monkeypatch.setenv("MEDKG_API_KEYS", f"topsecret-plain,{bad}")
    with pytest.raises(SettingsError) as info:
        load_settings()
    message = str(info.value)
    assert "MEDKG_API_KEYS" in message and "64 hex digits" in message
    assert "topsecret-plain" not in message and bad not in message
    # Not even a raw pydantic error (e.g. in a traceback) shows the value.
    with pytest.raises(ValidationError) as raw:
        Settings()
    assert "topsecret-plain" not in str(raw.value)
