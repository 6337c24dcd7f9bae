"""A PEP 517 build backend with the standard library alone: a pure-Python
wheel of src/mneme_client and an sdist. pyproject.toml names it
(backend-path), so `pip install clients/python` and `pip wheel` need no
network and no setuptools. The metadata below must match pyproject.toml
(tests/test_build.py checks it)."""
import base64
import hashlib
import io
import os
import tarfile
import zipfile

NAME, DIST, VERSION = "mneme-client", "mneme_client", "1.0.0"
ROOT = os.path.dirname(os.path.abspath(__file__))
METADATA = f"""Metadata-Version: 2.1
Name: {NAME}
Version: {VERSION}
Summary: mneme's SQL API as typed functions on psycopg 3, with LangGraph store and OpenAI Agents SDK session adapters
License: Apache-2.0
Requires-Python: >=3.9
Requires-Dist: psycopg>=3.1
Provides-Extra: langgraph
Requires-Dist: langgraph>=0.2; extra == "langgraph"
Provides-Extra: agents
Requires-Dist: openai-agents>=0.1; extra == "agents"
"""


def _package_files():
    src = os.path.join(ROOT, "src")
    for dirpath, _, files in sorted(os.walk(os.path.join(src, DIST))):
        for f in sorted(files):
            if f.endswith(".py") or f == "py.typed":
                full = os.path.join(dirpath, f)
                yield full, os.path.relpath(full, src).replace(os.sep, "/")


def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    name = f"{DIST}-{VERSION}-py3-none-any.whl"
    info = f"{DIST}-{VERSION}.dist-info"
    records = []
    with zipfile.ZipFile(os.path.join(wheel_directory, name), "w", zipfile.ZIP_DEFLATED) as whl:
        def add(arcname, data):
            whl.writestr(arcname, data)
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            records.append(f"{arcname},sha256={digest},{len(data)}")
        for full, arc in _package_files():
            with open(full, "rb") as fh:
                add(arc, fh.read())
        add(f"{info}/METADATA", METADATA.encode())
        add(f"{info}/WHEEL", b"Wheel-Version: 1.0\nGenerator: mneme build_backend\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
        whl.writestr(f"{info}/RECORD", "\n".join(records + [f"{info}/RECORD,,"]) + "\n")
    return name


def build_sdist(sdist_directory, config_settings=None):
    base = f"{DIST}-{VERSION}"
    name = f"{base}.tar.gz"
    with tarfile.open(os.path.join(sdist_directory, name), "w:gz") as tar:
        for rel in ["pyproject.toml", "build_backend.py", "README.md"]:
            tar.add(os.path.join(ROOT, rel), f"{base}/{rel}")
        for full, arc in _package_files():
            tar.add(full, f"{base}/src/{arc}")
        data = METADATA.encode()
        ti = tarfile.TarInfo(f"{base}/PKG-INFO")
        ti.size = len(data)
        tar.addfile(ti, io.BytesIO(data))
    return name
