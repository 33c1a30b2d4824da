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
