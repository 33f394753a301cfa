"""make sbom's SBOM: valid CycloneDX 1.5, the crates compiled in, each with a licence and a hash.

The SBOM is cut with `supply_chain.compiled_in()` (what `cargo tree` says
is compiled in), so these tests hold it against two other witnesses of the
build instead: the list cargo-auditable embedded in the bootstrap itself,
and the dep-info rustc left for each crate it compiled for the bootstrap's
target (BUILD_TARGET_DIR, the build's target directory).
"""

import hashlib
import json
import os
from pathlib import Path

import pytest
import supply_chain
from cyclonedx.schema import SchemaVersion
from cyclonedx.validation.json import JsonStrictValidator


def sbom_problems(named, listed, built=None):
    """What is wrong with an SBOM that names the packages NAMED ({(name,
    version)}, the function included) for a bootstrap whose embedded list
    holds LISTED ({(name, version): source} of its runtime entries), built
    where rustc compiled BUILT for its target ((registry {(name, version)},
    path {crate name}) from `supply_chain.built_for_target`), when known.

    The embedded list over-approximates on stable (docs/supply-chain.md: the
    helpers of proc macros, crates behind features never turned on), so it
    bounds the SBOM from above; the dep-info bounds it from the other side.
    A crate the list lacks is left out of the second comparison: a target
    directory may keep the dep-info of other builds."""
    problems = [
        f"{n} {v} is in the SBOM but the bootstrap does not list it as compiled in"
        for n, v in sorted(named - set(listed))
    ]
    problems += [
        f"{n} {v}, a path package the bootstrap lists as compiled in, is not in the SBOM"
        for (n, v), source in sorted(listed.items())
        if source == "local" and (n, v) not in named
    ]
    if built is not None:
        registry, local = built
        problems += [
            f"{n} {v} is in the SBOM but was not compiled for the bootstrap's target"
            for n, v in sorted(named)
            if listed.get((n, v)) == "crates.io" and (n, v) not in registry
        ]
        problems += [
            f"{n} {v} was compiled for the bootstrap's target and is in its list, but not in the SBOM"
            for (n, v), source in sorted(listed.items())
            if source == "crates.io" and (n, v) in registry and (n, v) not in named
        ]
        problems += [
            f"{n} {v} is in the SBOM but its crate was not compiled for the bootstrap's target"
            for n, v in sorted(named)
            if listed.get((n, v)) == "local" and n.replace("-", "_") not in local
        ]
    return problems


def listed_as_compiled_in(bootstrap):
    """{(name, version): source} of the runtime entries of the bootstrap's own list."""
    return {
        (p["name"], p["version"]): p["source"]
        for p in supply_chain.embedded(bootstrap)
        if p.get("kind", "runtime") == "runtime"
    }


def named_in(sbom):
    """{(name, version)} of the SBOM's components and the function it describes."""
    app = sbom["metadata"]["component"]
    return {(c["name"], c["version"]) for c in sbom["components"]} | {(app["name"], app["version"])}


@pytest.fixture(scope="session")
def build_target_dir():
    path = os.environ.get("BUILD_TARGET_DIR")
    if not path:
        pytest.fail("BUILD_TARGET_DIR is not set: make supply-chain and make dist name the build's target directory")
    if not Path(path).is_dir():
        pytest.fail(f"BUILD_TARGET_DIR={path} is not a directory")
    return Path(path)


def test_the_sbom_is_valid_cyclonedx_1_5(sbom_path):
    error = JsonStrictValidator(SchemaVersion.V1_5).validate_str(sbom_path.read_text())
    assert error is None, str(error)


def test_the_sbom_names_only_what_the_bootstrap_lists_as_compiled_in_with_licences_and_hashes(bootstrap, sbom_path):
    sbom = json.loads(sbom_path.read_text())
    name, version = supply_chain.root_package()
    components = {(c["name"], c["version"]): c for c in sbom["components"]}
    app = sbom["metadata"]["component"]
    assert (app["name"], app["version"]) == (name, version)
    assert sbom_problems(named_in(sbom), listed_as_compiled_in(bootstrap)) == []
    lock = supply_chain.lock_packages()
    assert [k for k, c in components.items() if not c.get("licenses")] == []
    assert [k for k, c in components.items() if lock[k] == "crates.io" and not c.get("hashes")] == []


def test_the_sbom_names_every_listed_crate_the_build_compiled_for_the_bootstrap(bootstrap, sbom_path, build_target_dir):
    sbom = json.loads(sbom_path.read_text())
    built = supply_chain.built_for_target(build_target_dir, supply_chain.elf_target(bootstrap))
    assert built[0], f"no dep-info for {supply_chain.elf_target(bootstrap)} under {build_target_dir}"
    assert sbom_problems(named_in(sbom), listed_as_compiled_in(bootstrap), built) == []


def test_the_sbom_names_the_bootstrap_it_describes_by_its_sha256(bootstrap, sbom_path):
    app = json.loads(sbom_path.read_text())["metadata"]["component"]
    assert app["hashes"] == [{"alg": "SHA-256", "content": hashlib.sha256(bootstrap.read_bytes()).hexdigest()}]
