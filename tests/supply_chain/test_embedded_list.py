"""The bootstrap carries cargo-auditable's list, and it names the crates compiled in."""

import json

import supply_chain


def test_the_bootstrap_lists_every_crate_compiled_into_it_and_nothing_else_unexplained(bootstrap):
    problems, report = supply_chain.embedded_list_report(bootstrap)
    print(json.dumps(report, indent=2))
    assert problems == []


def test_the_list_names_the_function_and_its_path_packages_at_their_cargo_toml_versions(bootstrap):
    packages = supply_chain.embedded(bootstrap)
    name, version = supply_chain.root_package()
    local = {(p["name"], p["version"]) for p in packages if p["source"] == "local"}
    lock = supply_chain.lock_packages()
    compiled = supply_chain.compiled_in(supply_chain.elf_target(bootstrap))
    assert (name, version) in local
    # A workspace member the function uses is compiled in: it is listed, at its version.
    assert local == {key for key in compiled if lock[key] == "local"}
    assert [p["name"] for p in packages if p.get("root")] == [name]


def test_no_dev_dependency_is_listed(bootstrap):
    target = supply_chain.elf_target(bootstrap)
    graph, _ = supply_chain.metadata_graph(target)
    listed = {(p["name"], p["version"]) for p in supply_chain.embedded(bootstrap)}
    dev_only = set(supply_chain.lock_packages()) - graph
    assert dev_only, "the function has dev-dependencies (proptest): the check needs some to mean anything"
    assert sorted(listed & dev_only) == []
