"""Supply-chain checks of a bootstrap (docs/supply-chain.md).

BOOTSTRAP names the bootstrap to check (make supply-chain passes the one
`sam build` made); SBOM its CycloneDX SBOM from `make sbom`, when there is
one; BUILD_TARGET_DIR the target directory of the build that made it (the
SBOM is held against rustc's dep-info there); RUST_AUDIT_INFO the reader of
cargo-auditable's list. The helpers live
in scripts/supply_chain.py, which `make sbom` and `make reproducible` share.
"""

import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))


@pytest.fixture(scope="session")
def bootstrap():
    path = os.environ.get("BOOTSTRAP")
    if not path:
        pytest.fail("BOOTSTRAP is not set: run these checks through make supply-chain (or set it to a bootstrap)")
    if not os.path.isfile(path):
        pytest.fail(f"BOOTSTRAP={path} is not a file: make sam-check builds .aws-sam/build/PlantsFunction/bootstrap")
    return Path(path)


@pytest.fixture(scope="session")
def sbom_path():
    path = os.environ.get("SBOM")
    if not path:
        pytest.skip("SBOM is not set: make supply-chain and make dist check the SBOM make sbom writes")
    return Path(path)
