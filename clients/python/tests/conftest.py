"""The databases come from the Go test (tests/clients_python_test.go):
MNEME_APP_URL (mneme_app), MNEME_ADMIN_URL (mneme_admin), MNEME_WORKER_URL
(mneme_worker: it stores an episode as the sidecar would), all with tenant
acme, directly or through PgBouncer; MNEME_EMPTY_URL unmigrated;
MNEME_V2_URL with mneme.version() 2.0.0."""
import os
import sys
import uuid

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "src"))

from mneme_client import Mneme  # noqa: E402

TENANT = "acme"


def url(name: str) -> str:
    v = os.environ.get(name)
    if not v:
        pytest.fail(f"{name} is not set: run these tests through go test ./tests -run TestPythonClient")
    return v


@pytest.fixture
def app():
    with Mneme.connect(url("MNEME_APP_URL"), tenant=TENANT) as m:
        yield m


@pytest.fixture
def admin():
    with Mneme.connect(url("MNEME_ADMIN_URL"), tenant=TENANT) as m:
        yield m


@pytest.fixture
def conv():
    return uuid.uuid4()
