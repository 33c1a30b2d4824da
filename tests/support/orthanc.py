"""A real PACS of a test's own: Debian's Orthanc with its DICOMweb plugin (packages ``orthanc`` and
``orthanc-dicomweb``, which `.ci/run` installs) on a free loopback port, its storage and its own JSON
configuration in a temporary folder (the system's /etc/orthanc is not read), filled through its REST API
(``POST /instances``). Without the binary or the plugin the test is skipped, and fails in CI."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from types import TracebackType

import httpx
import pytest

from tests.conftest import IN_CI
from tests.support.live_server import free_port
from tests.support.processes import stop, wait_for_http

PLUGIN_PATHS = (  # where Debian's orthanc-dicomweb puts the plugin (`dpkg -L orthanc-dicomweb`)
    Path("/usr/share/orthanc/plugins/libOrthancDicomWeb.so"),
    Path("/usr/lib/orthanc/libOrthancDicomWeb.so"),
)


def _missing(message: str) -> None:
    if IN_CI:
        pytest.fail(f"CI must run the DICOMweb tests, but {message}")
    pytest.skip(message)


def orthanc_binary() -> str:
    """The ``Orthanc`` executable (Debian puts it in /usr/sbin, which a user's PATH may lack), or a skip."""
    found = shutil.which("Orthanc") or shutil.which("Orthanc", path="/usr/sbin:/usr/local/sbin")
    if not found:
        _missing("the Orthanc binary is absent: `apt-get install orthanc orthanc-dicomweb`")
    return str(found)


def dicomweb_plugin() -> Path:
    """Orthanc's DICOMweb plugin (a .so), or a skip."""
    for path in PLUGIN_PATHS:
        if path.is_file():
            return path
    found = sorted(Path("/usr/lib/orthanc").glob("libOrthancDicomWeb.so*")) if Path("/usr/lib/orthanc").is_dir() else []
    if not found:
        _missing("Orthanc's DICOMweb plugin is absent: `apt-get install orthanc-dicomweb`")
    return found[0]


class Orthanc:
    """``with Orthanc(home) as pacs:`` an Orthanc on 127.0.0.1 (HTTP on a free port; its DICOM server off,
    remote access refused), storing under ``home``; ``users`` (name -> password) turns HTTP basic auth on.
    ``pacs.dicomweb`` is the DICOMweb root to give a client."""

    def __init__(self, home: Path, users: dict[str, str] | None = None) -> None:
        self.binary, self.plugin = orthanc_binary(), dicomweb_plugin()
        self.home, self.users = home, dict(users or {})
        self.port, self.dicom_port = free_port(), free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.dicomweb = f"{self.url}/dicom-web"
        self.log = home / "orthanc.log"
        self.process: subprocess.Popen[bytes] | None = None
        auth = next(iter(self.users.items()), None)
        self.http = httpx.Client(base_url=self.url, auth=auth, timeout=30)

    def config(self) -> dict:
        storage = self.home / "storage"
        return {
            "Name": "medkg-test-pacs",
            "StorageDirectory": str(storage),
            "IndexDirectory": str(storage),
            "HttpPort": self.port,
            "RemoteAccessAllowed": False,  # loopback clients only (Orthanc 1.10 has no bind address)
            "AuthenticationEnabled": bool(self.users),
            "RegisteredUsers": self.users,
            "DicomServerEnabled": False,  # DICOMweb only: no DIMSE listener
            "DicomPort": self.dicom_port,
            "Plugins": [str(self.plugin)],
            "DicomWeb": {"Enable": True, "Root": "/dicom-web/", "EnableWado": False, "Ssl": False},
            "OrthancExplorerEnabled": False,
            "WebDavEnabled": False,
            "MetricsEnabled": False,
            "ExecuteLuaEnabled": False,
            "LuaScripts": [],
            "SaveJobs": False,
            "ConcurrentJobs": 1,
            "HttpThreadsCount": 4,
            "StorageCompression": False,
        }

    def start(self, timeout_s: float = 30) -> None:
        self.home.mkdir(parents=True, exist_ok=True)
        config = self.home / "orthanc.json"
        config.write_text(json.dumps(self.config(), indent=2))
        with self.log.open("ab") as log:
            self.process = subprocess.Popen([self.binary, str(config)], cwd=self.home, stdout=log, stderr=log)
        wait_for_http(self.process, f"{self.url}/system", "Orthanc", self.log, timeout_s, 0.2, client=self.http)
        plugins = self.http.get("/plugins").json()
        assert "dicom-web" in plugins, f"Orthanc did not load {self.plugin}: {self.log.read_text()[-3000:]}"

    def stop(self) -> None:
        """A clean stop (SIGTERM: Orthanc closes its index), killed if it does not end in time."""
        stop(self.process)
        self.process = None

    def upload(self, data: bytes | Path) -> dict:
        """Store one DICOM file (``POST /instances``); Orthanc's answer (``ID``, ``ParentStudy``, ``Status``)."""
        body = data.read_bytes() if isinstance(data, Path) else data
        r = self.http.post("/instances", content=body, headers={"Content-Type": "application/dicom"})
        assert r.status_code == 200, f"Orthanc refused an upload: HTTP {r.status_code} {r.text[:300]}"
        return r.json()

    def __enter__(self) -> Orthanc:
        try:
            self.start()
        except BaseException:
            self.close()
            raise
        return self

    def close(self) -> None:
        self.stop()
        self.http.close()

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.close()
