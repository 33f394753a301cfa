"""Deployment checks: template.yaml, samconfig.toml and openapi.yaml, offline.

Each test proves one property and is named as the sentence it proves. The
documents are read once per session; the SAM translator renders each
variant of the template once. `pytest tests/deploy -k alarm` runs a part.
"""

import documents
import pytest


@pytest.fixture(scope="session")
def template():
    return documents.load_template(documents.read("template.yaml"))


@pytest.fixture(scope="session")
def openapi():
    return documents.load_openapi(documents.read("openapi.yaml"))


@pytest.fixture(scope="session")
def samconfig():
    return documents.read("samconfig.toml")


@pytest.fixture(scope="session")
def runbook():
    return documents.read("docs/operations.md")


@pytest.fixture(scope="session")
def emf_source():
    return documents.read("src/telemetry/mod.rs")


@pytest.fixture(scope="session")
def emitted_metrics(emf_source):
    return documents.emitted_metrics(emf_source)


@pytest.fixture(scope="session")
def variants(template):
    """Each variant of documents.VARIANTS as CloudFormation would create it."""
    return documents.render_variants(template)
