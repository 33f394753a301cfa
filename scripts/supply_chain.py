#!/usr/bin/env python3
"""What is inside a bootstrap, and what it needs from Lambda's system.

Shared by the supply-chain checks (tests/supply_chain/) and by `make sbom`
and `make reproducible`; docs/supply-chain.md says what each check means.

- **Compiled in**: the packages of Cargo.lock that cargo compiles for the
  function's target and links into the bootstrap. The reference is cargo's
  own resolver (`cargo tree -e normal,no-proc-macro --target T`): the root
  package and its normal dependencies, path packages such as a workspace
  member included, with this build's features; no dev-dependencies, no
  build-dependencies (build scripts and what they run), no proc-macros or
  what only they use (they run inside the compiler).
- **The embedded list**: cargo-auditable's `.dep-v0` section, read with the
  reference reader (`rust-audit-info`, on the `auditable-info` library).
- **AL2023**: the ELF's interpreter, the libraries it links and the symbol
  versions it needs (pyelftools), against provided.al2023.

    supply_chain.py list BOOTSTRAP            # the embedded list against what is compiled in
    supply_chain.py al2023 BOOTSTRAP...       # what each bootstrap needs from the system
    supply_chain.py sbom BOOTSTRAP CDX OUT    # cargo-cyclonedx's SBOM cut to what is compiled in
    supply_chain.py zip BUILD_DIR OUT         # the deployment zip, as `sam deploy` makes it
    supply_chain.py built TARGET_DIR BOOTSTRAP  # what a clean build compiled, against compiled in
"""

import base64
import functools
import hashlib
import json
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CRATES_IO = "registry+https://github.com/rust-lang/crates.io-index"

TARGETS = {"EM_X86_64": "x86_64-unknown-linux-gnu", "EM_AARCH64": "aarch64-unknown-linux-gnu"}
INTERPRETERS = {
    "x86_64-unknown-linux-gnu": "/lib64/ld-linux-x86-64.so.2",
    "aarch64-unknown-linux-gnu": "/lib/ld-linux-aarch64.so.1",
}
# Amazon Linux 2023, the OS of Lambda's provided.al2023: glibc 2.34, GCC 11's
# libgcc_s. The libraries are glibc's own (and libgcc_s, which glibc loads
# itself); nothing else is promised in the runtime's minimal image.
AL2023_GLIBC = (2, 34)
AL2023_LIBGCC_MAJOR = 11
AL2023_LIBRARIES = frozenset(
    {
        "libc.so.6",
        "libm.so.6",
        "libdl.so.2",
        "libpthread.so.0",
        "librt.so.1",
        "libutil.so.1",
        "libresolv.so.2",
        "libgcc_s.so.1",
        "ld-linux-x86-64.so.2",
        "ld-linux-aarch64.so.1",
    }
)


class SupplyChainError(Exception):
    """A tool this module runs failed, or a file is not what it should be."""


def source_kind(source):
    """Cargo.lock's or cargo metadata's source, as cargo-auditable records it."""
    if source is None:
        return "local"
    if source == CRATES_IO:
        return "crates.io"
    return source.split("+", 1)[0]


def run(command, cwd=ROOT):
    done = subprocess.run(command, cwd=cwd, capture_output=True, text=True)
    if done.returncode != 0:
        raise SupplyChainError(f"{' '.join(map(str, command))} failed: {done.stderr.strip()}")
    return done.stdout


# ---- the package and its lock file ----------------------------------------


def root_package(root=ROOT):
    """(name, version) of the package at the root (the function)."""
    manifest = tomllib.loads((root / "Cargo.toml").read_text())
    version = manifest["package"]["version"]
    if isinstance(version, dict):  # version.workspace = true
        version = manifest["workspace"]["package"]["version"]
    return manifest["package"]["name"], version


@functools.cache
def lock_packages(root=ROOT):
    """{(name, version): source kind} for every package of Cargo.lock."""
    lock = tomllib.loads((root / "Cargo.lock").read_text())
    return {(p["name"], p["version"]): source_kind(p.get("source")) for p in lock["package"]}


@functools.cache
def tree(target, edges, root=ROOT):
    """{(name, version)} that `cargo tree -e EDGES` shows for the function on TARGET."""
    name, _ = root_package(root)
    out = run(
        ["cargo", "tree", "--locked", "-p", name, "--target", target, "-e", edges, "--prefix", "none", "-f", "{p}"],
        cwd=root,
    )
    found = set()
    for line in out.splitlines():
        parts = line.split()
        if len(parts) >= 2 and parts[1].startswith("v"):
            found.add((parts[0], parts[1][1:]))
    return found


def compiled_in(target, root=ROOT):
    return tree(target, "normal,no-proc-macro", root)


@functools.cache
def metadata_graph(target, root=ROOT):
    """What cargo-auditable reads on stable: `cargo metadata --filter-platform`
    (features unified over the whole graph, dev-dependencies included). Returns
    ({(name, version)} reachable from the function without a dev edge,
    {(name, version)} of the proc-macro packages)."""
    name, version = root_package(root)
    meta = json.loads(
        run(["cargo", "metadata", "--locked", "--format-version", "1", "--filter-platform", target], root)
    )
    by_id = {p["id"]: (p["name"], p["version"]) for p in meta["packages"]}
    proc_macros = {by_id[p["id"]] for p in meta["packages"] if any("proc-macro" in t["kind"] for t in p["targets"])}
    nodes = {n["id"]: n for n in meta["resolve"]["nodes"]}
    start = next(i for i, key in by_id.items() if key == (name, version))
    seen, todo = {start}, [start]
    while todo:
        for dep in nodes[todo.pop()]["deps"]:
            if any(k["kind"] != "dev" for k in dep["dep_kinds"]) and dep["pkg"] not in seen:
                seen.add(dep["pkg"])
                todo.append(dep["pkg"])
    return {by_id[i] for i in seen}, proc_macros


# ---- the ELF -----------------------------------------------------------------


def elf_target(path):
    """The Rust target triple of an ELF executable (x86-64 or aarch64 Linux)."""
    from elftools.common.exceptions import ELFError
    from elftools.elf.elffile import ELFFile

    try:
        with open(path, "rb") as f:
            machine = ELFFile(f).header["e_machine"]
    except (ELFError, OSError) as e:
        raise SupplyChainError(f"{path}: not an ELF file ({e})") from e
    if machine not in TARGETS:
        raise SupplyChainError(f"{path}: an ELF for {machine}, neither x86-64 nor aarch64")
    return TARGETS[machine]


def _version(text):
    return tuple(int(x) for x in text.split("."))


def al2023_problems(path):
    """What the ELF at PATH needs that provided.al2023 does not have, and the
    newest glibc version it needs: (problems, newest)."""
    from elftools.elf.dynamic import DynamicSection
    from elftools.elf.elffile import ELFFile
    from elftools.elf.gnuversions import GNUVerNeedSection

    target = elf_target(path)
    problems, newest = [], (0,)
    with open(path, "rb") as f:
        elf = ELFFile(f)
        interpreters = [s.get_interp_name() for s in elf.iter_segments() if s["p_type"] == "PT_INTERP"]
        if interpreters != [INTERPRETERS[target]]:
            problems.append(f"its interpreter is {interpreters or 'missing'}, not {INTERPRETERS[target]}")
        needed = [
            tag.needed
            for section in elf.iter_sections()
            if isinstance(section, DynamicSection)
            for tag in section.iter_tags()
            if tag.entry.d_tag == "DT_NEEDED"
        ]
        problems += [
            f"it links {lib}, which provided.al2023 does not have" for lib in needed if lib not in AL2023_LIBRARIES
        ]
        for section in elf.iter_sections():
            if not isinstance(section, GNUVerNeedSection):
                continue
            for verneed, auxes in section.iter_versions():
                for aux in auxes:
                    wanted = aux.name
                    glibc = re.fullmatch(r"GLIBC_(\d+(?:\.\d+)+)", wanted)
                    libgcc = re.fullmatch(r"GCC_(\d+(?:\.\d+)*)", wanted)
                    if glibc:
                        newest = max(newest, _version(glibc.group(1)))
                        if _version(glibc.group(1)) > AL2023_GLIBC:
                            problems.append(f"it needs {wanted} from {verneed.name}; AL2023 has glibc 2.34")
                    elif libgcc:
                        if _version(libgcc.group(1))[0] > AL2023_LIBGCC_MAJOR:
                            problems.append(f"it needs {wanted} from {verneed.name}; AL2023 has GCC 11's libgcc_s")
                    else:
                        problems.append(f"it needs {wanted} from {verneed.name}, no public glibc or libgcc version")
    return problems, ".".join(map(str, newest))


# ---- the embedded list -------------------------------------------------------


def audit_info_reader():
    reader = os.environ.get("RUST_AUDIT_INFO") or str(ROOT / ".tools/rust-audit-info/bin/rust-audit-info")
    if not os.access(reader, os.X_OK):
        raise SupplyChainError(f"rust-audit-info not found at {reader}: make tools-supply-chain installs it")
    return reader


@functools.cache
def embedded(path):
    """cargo-auditable's list in the bootstrap at PATH: a list of packages
    (name, version, source, kind, dependencies, root)."""
    done = subprocess.run([audit_info_reader(), str(path)], capture_output=True, text=True)
    if done.returncode != 0:
        raise SupplyChainError(f"{path} carries no cargo-auditable list: {done.stderr.strip()}")
    return json.loads(done.stdout)["packages"]


def embedded_list_report(path, root=ROOT):
    """Compare the list in the bootstrap at PATH with what is compiled in:
    (problems, report); no problems is what docs/supply-chain.md calls
    "names exactly the crates compiled in"."""
    target = elf_target(path)
    problems, report = list_problems(embedded(path), target, root)
    return problems, {"bootstrap": str(path), **report}


def list_problems(packages, target, root=ROOT):
    """The problems of an embedded list PACKAGES for a bootstrap for TARGET,
    and a report of what it holds."""
    lock = lock_packages(root)
    compiled = compiled_in(target, root)
    with_macros = tree(target, "normal", root)
    resolved = tree(target, "normal,build", root)
    graph, proc_macros = metadata_graph(target, root)

    problems = []
    listed = {}
    for p in packages:
        key = (p["name"], p["version"])
        kind = p.get("kind", "runtime")
        listed[key] = kind
        if key not in lock:
            problems.append(f"{p['name']} {p['version']} is listed but not in Cargo.lock")
        elif lock[key] != p["source"]:
            problems.append(f"{p['name']} {p['version']} is listed from {p['source']} but Cargo.lock has {lock[key]}")
        elif key not in graph:
            problems.append(f"{p['name']} {p['version']} is listed but the function does not depend on it (dev-only?)")
    roots = [(p["name"], p["version"], p["source"]) for p in packages if p.get("root")]
    if roots != [(*root_package(root), "local")]:
        problems.append(f"the list's root is {roots}, not {root_package(root)} (local)")

    for key in sorted(compiled):
        if key not in listed:
            problems.append(f"{key[0]} {key[1]} is compiled in but not listed")
        elif listed[key] != "runtime":
            problems.append(f"{key[0]} {key[1]} is compiled in but listed as {listed[key]}")

    # cargo-auditable on stable over-approximates: two kinds of surplus are
    # known and named (docs/supply-chain.md), anything else is wrong.
    macros, unused_features = [], []
    for key in sorted(k for k, kind in listed.items() if kind == "runtime" and k not in compiled and k in graph):
        if key in proc_macros or key in with_macros:
            macros.append(key)
        elif key not in resolved:
            unused_features.append(key)
        else:
            problems.append(f"{key[0]} {key[1]} is a build tool of the function but listed as runtime")

    report = {
        "target": target,
        "compiled_in": len(compiled),
        "listed_runtime": sum(1 for kind in listed.values() if kind == "runtime"),
        "listed_build": sum(1 for kind in listed.values() if kind == "build"),
        "surplus_proc_macros": [f"{n} {v}" for n, v in macros],
        "surplus_features_never_on": [f"{n} {v}" for n, v in unused_features],
        "path_packages": sorted(f"{n} {v}" for (n, v) in compiled if lock.get((n, v)) == "local"),
    }
    return problems, report


def built_for_target(target_dir, target, root=ROOT):
    """{(name, version)} of the registry packages a build compiled for TARGET
    into TARGET_DIR, and {crate name} of the path packages, from rustc's
    dep-info files: what the build did, to hold compiled_in() against. Only
    meaningful for a target directory that saw one build."""
    registry, local = set(), set()
    for d in (Path(target_dir) / target / "release" / "deps").glob("*.d"):
        first = d.read_text().split("\n", 1)[0]
        sources = first.split(": ", 1)[1].split() if ": " in first else []
        found = re.search(r"/registry/src/[^/]+/([^/]+)/", sources[0]) if sources else None
        if found:
            name, version = re.fullmatch(r"(.+?)-(\d+\.\d+\.\d+\S*)", found.group(1)).groups()
            registry.add((name, version))
        elif sources:
            local.add(d.name.rsplit("-", 1)[0])
    return registry, local


# ---- the SBOM ----------------------------------------------------------------


def cut_sbom(cdx, bootstrap, root=ROOT):
    """cargo-cyclonedx's SBOM (CDX, a dict) cut to the crates compiled into
    BOOTSTRAP, the bootstrap's SHA-256 on the function's component, and the
    clone's absolute path out of the references. Returns (sbom, problems)."""
    target = elf_target(bootstrap)
    compiled = compiled_in(target, root)
    name, version = root_package(root)
    problems = []
    prefix = "path+" + (root.as_uri())

    def local(ref):
        return ref.replace(prefix, "path+file://.")

    kept = []
    for c in cdx.get("components", []):
        key = (c["name"], c["version"])
        if key not in compiled:
            continue
        if not c.get("licenses"):
            problems.append(f"{c['name']} {c['version']}: no licence in the SBOM")
        if not c.get("hashes") and c.get("purl", "").startswith("pkg:cargo/") and "download_url=file" not in c["purl"]:
            problems.append(f"{c['name']} {c['version']}: no hash in the SBOM")
        c["bom-ref"] = local(c["bom-ref"])
        kept.append(c)
    listed = {(c["name"], c["version"]) for c in kept} | {(name, version)}
    problems += [f"{n} {v} is compiled in but not in the SBOM" for n, v in sorted(compiled - listed)]

    refs = {c["bom-ref"] for c in kept}
    app = cdx["metadata"]["component"]
    app["bom-ref"] = local(app["bom-ref"])
    for sub in app.get("components", []):
        sub["bom-ref"] = local(sub["bom-ref"])
    digest = hashlib.sha256(Path(bootstrap).read_bytes()).hexdigest()
    app["hashes"] = [{"alg": "SHA-256", "content": digest}]
    app.setdefault("properties", []).append({"name": "plant-store:bootstrap:sha256", "value": digest})
    refs.add(app["bom-ref"])
    deps = []
    for d in cdx.get("dependencies", []):
        ref = local(d["ref"])
        if ref in refs:
            deps.append({"ref": ref, "dependsOn": [r for r in map(local, d.get("dependsOn", [])) if r in refs]})
    cdx["components"] = kept
    cdx["dependencies"] = deps
    return cdx, problems


# ---- the deployment zip ------------------------------------------------------


def lambda_zip(build_dir, out):
    """Zip BUILD_DIR exactly as `sam deploy` does before it uploads the code
    (SAM CLI's own function, so the bytes and Lambda's CodeSha256 agree).
    Returns (hex SHA-256, CodeSha256 as Lambda shows it)."""
    from samcli.lib.package.utils import make_zip_with_lambda_permissions

    out = Path(out)
    made = Path(make_zip_with_lambda_permissions(str(out.with_suffix("")), str(build_dir)))
    if made != out:
        made.replace(out)
    digest = hashlib.sha256(out.read_bytes()).digest()
    return digest.hex(), base64.b64encode(digest).decode()


def main(argv):
    command, *args = argv or ["help"]
    try:
        if command == "list" and len(args) == 1:
            problems, report = embedded_list_report(Path(args[0]))
            print(json.dumps(report, indent=2))
        elif command == "al2023" and args:
            problems = []
            for path in args:
                found, newest = al2023_problems(path)
                problems += [f"{path}: {p}" for p in found]
                print(f"{path} ({elf_target(path)}): newest glibc symbol version needed {newest}")
        elif command == "sbom" and len(args) == 3:
            sbom, problems = cut_sbom(json.loads(Path(args[1]).read_text()), Path(args[0]))
            Path(args[2]).write_text(json.dumps(sbom, indent=2) + "\n")
            print(f"wrote {args[2]}: {len(sbom['components'])} crates compiled into {args[0]}")
        elif command == "zip" and len(args) == 2:
            problems = []
            hex_digest, code_sha = lambda_zip(args[0], args[1])
            print(f"{hex_digest}  {args[1]}  (Lambda's CodeSha256: {code_sha})")
        elif command == "built" and len(args) == 2:
            target = elf_target(args[1])
            registry, local = built_for_target(args[0], target)
            lock = lock_packages()
            compiled = compiled_in(target)
            expected = {k for k in compiled if lock.get(k) != "local"}
            expected_local = {n.replace("-", "_") for (n, v) in compiled if lock.get((n, v)) == "local"}
            problems = [
                f"{n} {v} was compiled for {target} but cargo tree does not show it"
                for n, v in sorted(registry - expected)
            ]
            problems += [f"{n} {v} is in cargo tree but was not compiled" for n, v in sorted(expected - registry)]
            if not expected_local <= local:
                problems.append(f"path packages {sorted(expected_local - local)} were not compiled")
            print(
                f"the build compiled {len(registry)} crates.io packages and {sorted(local)} for {target}: "
                + ("what cargo tree says is compiled in" if not problems else "not what cargo tree says")
            )
        else:
            print(__doc__, file=sys.stderr)
            return 2
    except SupplyChainError as e:
        problems = [str(e)]
    for p in problems:
        print(f"FAIL {p}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
