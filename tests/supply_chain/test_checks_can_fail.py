"""Each supply-chain check fails when what it guards breaks: small ELF
executables built here with the C compiler (no cargo-auditable list, a
glibc symbol newer than 2.34, a library AL2023 lacks, another interpreter),
and the real list with one thing wrong in it: among them a surplus that
cargo-auditable's own rule over cargo metadata does not give, in either
direction."""

import platform
import shutil
import subprocess

import pytest
import supply_chain

needs_cc = pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler (cc)")


def cc(tmp_path, name, source, *flags):
    (tmp_path / f"{name}.c").write_text(source)
    out = tmp_path / name
    subprocess.run(["cc", "-o", str(out), str(tmp_path / f"{name}.c"), *flags], check=True, cwd=tmp_path)
    return out


MAIN = "int main(void) { return 0; }\n"


@needs_cc
def test_a_binary_built_without_cargo_auditable_fails_the_list_check(tmp_path):
    plain = cc(tmp_path, "plain", MAIN)
    with pytest.raises(supply_chain.SupplyChainError, match="carries no cargo-auditable list"):
        supply_chain.embedded_list_report(plain)


@needs_cc
def test_a_glibc_symbol_newer_than_2_34_fails_the_al2023_check(tmp_path):
    glibc = tuple(int(x) for x in platform.libc_ver()[1].split(".")[:2])
    if glibc < (2, 36):
        pytest.skip(f"this machine's glibc {glibc} has no symbol newer than 2.34 to link (arc4random is 2.36)")
    binary = cc(tmp_path, "arc4random", "#include <stdlib.h>\nint main(void) { return arc4random() & 1; }\n")
    problems, newest = supply_chain.al2023_problems(binary)
    assert newest == "2.36"
    assert any("GLIBC_2.36" in p for p in problems), problems


@needs_cc
def test_a_library_al2023_lacks_fails_the_al2023_check(tmp_path):
    (tmp_path / "fake.c").write_text("int plant_store_fake(void) { return 1; }\n")
    subprocess.run(["cc", "-shared", "-fPIC", "-o", "libplantstorefake.so", "fake.c"], check=True, cwd=tmp_path)
    binary = cc(
        tmp_path,
        "linked",
        "int plant_store_fake(void);\nint main(void) { return plant_store_fake(); }\n",
        "-L.",
        "-lplantstorefake",
    )
    problems, _ = supply_chain.al2023_problems(binary)
    assert any("libplantstorefake.so" in p for p in problems), problems


@needs_cc
def test_another_interpreter_fails_the_al2023_check(tmp_path):
    binary = cc(tmp_path, "interp", MAIN, "-Wl,--dynamic-linker=/lib/ld-plant-store.so.1")
    problems, _ = supply_chain.al2023_problems(binary)
    assert any("interpreter" in p for p in problems), problems


def broken_lists(packages, target):
    """(what is wrong, the list with it): one compiled-in crate, one build
    tool, and the surplus cargo-auditable's rule over cargo metadata gives."""
    by_name = {p["name"]: i for i, p in enumerate(packages)}
    compiled = supply_chain.compiled_in(target)
    _, proc_macros = supply_chain.metadata_graph(target)
    # A proc-macro cargo-auditable recognises (kind build): the old check let
    # any proc-macro through as runtime surplus.
    macro = next(p["name"] for p in packages if p.get("kind") == "build" and (p["name"], p["version"]) in proc_macros)
    # One entry of the surplus: a runtime entry not compiled in.
    surplus = next(
        p["name"]
        for p in packages
        if p.get("kind", "runtime") == "runtime" and (p["name"], p["version"]) not in compiled
    )

    def changed(name, **fields):
        copy = [dict(p) for p in packages]
        copy[by_name[name]].update(fields)
        return copy

    def without(name):
        return [p for p in packages if p["name"] != name]

    return {
        "compiled in, not listed": ("compiled in but not listed", without("tokio")),
        "a version not in the lock": ("not in Cargo.lock", changed("tokio", version="0.0.1")),
        "compiled in, listed as build": ("compiled in but listed as build", changed("tokio", kind="build")),
        "another source": ("listed from git but Cargo.lock has crates.io", changed("tokio", source="git")),
        "a build script's tool as runtime": (
            "build tool of the function but listed as runtime",
            changed("cc", kind="runtime"),
        ),
        "a recognised proc-macro as runtime": (
            "build tool of the function but listed as runtime",
            changed(macro, kind="runtime"),
        ),
        "a build tool missing": (
            "build entry by cargo-auditable's rule over cargo metadata but not listed",
            without("cc"),
        ),
        "a surplus entry missing": ("runtime surplus entry by cargo-auditable's rule", without(surplus)),
        "a second root": ("the list's root", changed("tokio", root=True)),
    }


CASES = [
    "compiled in, not listed",
    "a version not in the lock",
    "compiled in, listed as build",
    "another source",
    "a build script's tool as runtime",
    "a recognised proc-macro as runtime",
    "a build tool missing",
    "a surplus entry missing",
    "a second root",
]


@pytest.mark.parametrize("case", CASES)
def test_the_list_check_fails_for_each_kind_of_wrong_list(bootstrap, case):
    packages = supply_chain.embedded(bootstrap)
    target = supply_chain.elf_target(bootstrap)
    assert supply_chain.list_problems(packages, target)[0] == [], "the real list must pass first"
    wrong, broken = broken_lists(packages, target)[case]
    problems, _ = supply_chain.list_problems(broken, target)
    assert any(wrong in p for p in problems), (wrong, problems)


def test_a_dev_dependency_in_the_list_fails_the_list_check(bootstrap):
    packages = supply_chain.embedded(bootstrap)
    target = supply_chain.elf_target(bootstrap)
    graph, _ = supply_chain.metadata_graph(target)
    lock = supply_chain.lock_packages()
    name, version = sorted(set(lock) - graph)[0]
    dev = {"name": name, "version": version, "source": lock[(name, version)], "dependencies": []}
    problems, _ = supply_chain.list_problems([*packages, dev], target)
    assert any(f"{name} {version} is listed but the function does not depend on it" in p for p in problems), problems


def test_an_sbom_that_is_not_cyclonedx_fails_the_schema_check():
    from cyclonedx.schema import SchemaVersion
    from cyclonedx.validation.json import JsonStrictValidator

    broken = '{"bomFormat": "CycloneDX", "specVersion": "1.5", "version": 1, "components": [{"name": 7}]}'
    assert JsonStrictValidator(SchemaVersion.V1_5).validate_str(broken) is not None


@needs_cc
def test_an_object_file_is_not_taken_for_a_bootstrap(tmp_path):
    (tmp_path / "part.c").write_text(MAIN)
    subprocess.run(["cc", "-c", "-o", "part.o", "part.c"], check=True, cwd=tmp_path)
    with pytest.raises(supply_chain.SupplyChainError, match="not a 64-bit ELF executable"):
        supply_chain.elf_target(tmp_path / "part.o")


# A bootstrap's list and its build, as data: the function, a path package,
# two crates compiled in, and one surplus entry cargo-auditable writes on
# stable (a proc macro's helper, compiled for the build machine only).
LISTED = {
    ("plant-store", "1.0.0"): "local",
    ("lambda-host", "0.1.0"): "local",
    ("tokio", "1.54.1"): "crates.io",
    ("serde", "1.0.229"): "crates.io",
    ("syn", "2.0.117"): "crates.io",
}
BUILT = ({("tokio", "1.54.1"), ("serde", "1.0.229")}, {"plant_store", "lambda_host"})
NAMED = {("plant-store", "1.0.0"), ("lambda-host", "0.1.0"), ("tokio", "1.54.1"), ("serde", "1.0.229")}

SBOM_CASES = {
    "a crate compiled in, missing": (
        "was compiled for the bootstrap's target and is in its list, but not in the SBOM",
        NAMED - {("serde", "1.0.229")},
    ),
    "a path package missing": ("a path package the bootstrap lists as compiled in", NAMED - {("lambda-host", "0.1.0")}),
    "a crate the bootstrap lacks": ("the bootstrap does not list it", NAMED | {("ring", "0.17.14")}),
    "another version": ("the bootstrap does not list it", NAMED - {("tokio", "1.54.1")} | {("tokio", "1.54.0")}),
    "a listed crate not compiled for the target": (
        "was not compiled for the bootstrap's target",
        NAMED | {("syn", "2.0.117")},
    ),
}


def test_the_sbom_comparison_passes_an_sbom_of_exactly_what_the_build_compiled_in():
    from test_sbom import sbom_problems

    assert sbom_problems(NAMED, LISTED, BUILT) == []


@pytest.mark.parametrize("case", SBOM_CASES)
def test_the_sbom_comparison_fails_for_each_kind_of_wrong_sbom(case):
    from test_sbom import sbom_problems

    wrong, named = SBOM_CASES[case]
    problems = sbom_problems(named, LISTED, BUILT)
    assert any(wrong in p for p in problems), (wrong, problems)
