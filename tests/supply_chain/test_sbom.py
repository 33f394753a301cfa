"""make sbom's SBOM: valid CycloneDX 1.5, the crates compiled in, each with a licence and a hash."""

import hashlib
import json

import supply_chain
from cyclonedx.schema import SchemaVersion
from cyclonedx.validation.json import JsonStrictValidator


def test_the_sbom_is_valid_cyclonedx_1_5(sbom_path):
    error = JsonStrictValidator(SchemaVersion.V1_5).validate_str(sbom_path.read_text())
    assert error is None, str(error)


def test_the_sbom_names_exactly_the_crates_compiled_in_with_licences_and_hashes(bootstrap, sbom_path):
    sbom = json.loads(sbom_path.read_text())
    name, version = supply_chain.root_package()
    compiled = supply_chain.compiled_in(supply_chain.elf_target(bootstrap))
    components = {(c["name"], c["version"]): c for c in sbom["components"]}
    app = sbom["metadata"]["component"]
    assert (app["name"], app["version"]) == (name, version)
    assert set(components) | {(name, version)} == compiled
    lock = supply_chain.lock_packages()
    assert [k for k, c in components.items() if not c.get("licenses")] == []
    assert [k for k, c in components.items() if lock[k] == "crates.io" and not c.get("hashes")] == []


def test_the_sbom_names_the_bootstrap_it_describes_by_its_sha256(bootstrap, sbom_path):
    app = json.loads(sbom_path.read_text())["metadata"]["component"]
    assert app["hashes"] == [{"alg": "SHA-256", "content": hashlib.sha256(bootstrap.read_bytes()).hexdigest()}]
