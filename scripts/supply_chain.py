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
    supply_chain.py elf BOOTSTRAP TRIPLE      # an ELF executable for that Rust target, or exit 1
    supply_chain.py version                   # the function's version (Cargo.toml), which names the release
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
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

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
    """Cargo.lock's or cargo metadata's source, as cargo-auditable records it.
    Every registry source is crates.io: deny.toml's sources check (make audit)
    admits no other registry, and one that slipped in would still fail the
    list check (cargo-auditable records it as "registry")."""
    if source is None:
        return "local"
    kind = source.split("+", 1)[0]
    return "crates.io" if kind in ("registry", "sparse") else kind


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


# The order of cargo-auditable's kinds: a package reached by several paths
# takes the strongest of them, and no package is stronger than its parent.
_KINDS = {"dev": 0, "build": 1, "runtime": 2}


@functools.cache
def auditable_list(target, root=ROOT):
    """{(name, version): kind} that cargo-auditable 0.7 writes on stable, worked
    out from the same `cargo metadata` by the same rule
    (`auditable_from_metadata.rs`): from the function, breadth first, each
    edge's strongest kind (normal: runtime, build, dev) capped by its
    parent's; a package is a proc-macro, capped at build, only when its one
    target is the proc-macro (a proc-macro that also has tests, examples or a
    build script is not recognised: docs/upstream/cargo-auditable-proc-macro-kind.md);
    features are unified over the whole graph (docs/upstream/cargo-auditable-unified-features.md);
    dev-only packages are left out."""
    name, version = root_package(root)
    meta = json.loads(
        run(["cargo", "metadata", "--locked", "--format-version", "1", "--filter-platform", target], root)
    )
    by_id = {p["id"]: (p["name"], p["version"]) for p in meta["packages"]}
    proc_macros = {
        p["id"] for p in meta["packages"] if len(p["targets"]) == 1 and "proc-macro" in p["targets"][0]["kind"]
    }
    nodes = {n["id"]: n for n in meta["resolve"]["nodes"]}
    start = next(i for i, key in by_id.items() if key == (name, version))
    kinds, queue = {start: _KINDS["runtime"]}, [start]
    while queue:
        following = []
        for parent in queue:
            for dep in nodes[parent]["deps"]:
                kind = max(_KINDS["runtime" if k["kind"] is None else k["kind"]] for k in dep["dep_kinds"])
                if dep["pkg"] in proc_macros:
                    kind = min(kind, _KINDS["build"])
                kind = min(kind, kinds[parent])
                if dep["pkg"] not in kinds or kind > kinds[dep["pkg"]]:
                    kinds[dep["pkg"]] = kind
                    following.append(dep["pkg"])
        queue = following
    names = {v: k for k, v in _KINDS.items()}
    return {by_id[i]: names[k] for i, k in kinds.items() if k != _KINDS["dev"]}


# ---- the ELF -----------------------------------------------------------------


def elf_target(path):
    """The Rust target triple of an ELF executable (x86-64 or aarch64 Linux):
    64-bit, a program (EXEC, or DYN for a PIE) with an entry point."""
    from elftools.common.exceptions import ELFError
    from elftools.elf.elffile import ELFFile

    try:
        with open(path, "rb") as f:
            elf = ELFFile(f)
            header, bits = elf.header, elf.elfclass
    except (ELFError, OSError) as e:
        raise SupplyChainError(f"{path}: not an ELF file ({e})") from e
    if bits != 64 or header["e_type"] not in ("ET_EXEC", "ET_DYN") or header["e_entry"] == 0:
        raise SupplyChainError(f"{path}: not a 64-bit ELF executable ({bits}-bit {header['e_type']})")
    if header["e_machine"] not in TARGETS:
        raise SupplyChainError(f"{path}: an ELF for {header['e_machine']}, neither x86-64 nor aarch64")
    return TARGETS[header["e_machine"]]


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
    resolved = tree(target, "normal,build", root)
    graph, proc_macros = metadata_graph(target, root)
    expected = auditable_list(target, root)

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
        elif key in compiled:
            if kind != "runtime":
                problems.append(f"{key[0]} {key[1]} is compiled in but listed as {kind}")
        elif kind != expected.get(key):
            if expected.get(key) == "build":
                problems.append(f"{key[0]} {key[1]} is a build tool of the function but listed as {kind}")
            else:
                rule = expected.get(key, "no entry")
                problems.append(f"{key[0]} {key[1]} is listed as {kind}; cargo-auditable's rule gives {rule}")
    roots = [(p["name"], p["version"], p["source"]) for p in packages if p.get("root")]
    if roots != [(*root_package(root), "local")]:
        problems.append(f"the list's root is {roots}, not {root_package(root)} (local)")
    problems += [f"{n} {v} is compiled in but not listed" for n, v in sorted(compiled - set(listed))]

    # cargo-auditable on stable over-approximates (docs/supply-chain.md):
    # the runtime entries beyond what is compiled in must be exactly those
    # its own rule gives from cargo metadata, no more and no fewer.
    surplus = {k for k, kind in listed.items() if kind == "runtime" and k not in compiled}
    expected_surplus = {k for k, kind in expected.items() if kind == "runtime" and k not in compiled}
    # (A surplus entry cargo-auditable would not write is caught above.)
    problems += [
        f"{n} {v} is a runtime surplus entry by cargo-auditable's rule over cargo metadata but not listed as runtime"
        for n, v in sorted(expected_surplus - surplus)
    ]
    problems += [
        f"{n} {v} is a build entry by cargo-auditable's rule over cargo metadata but not listed"
        for (n, v), kind in sorted(expected.items())
        if kind == "build" and (n, v) not in listed
    ]
    # Why each surplus entry is there, for the log: a proc-macro or what
    # only proc-macros use, or a crate behind features this build never turns on.
    with_macros = tree(target, "normal", root)
    macros = sorted(k for k in surplus if k in proc_macros or k in with_macros)
    unused_features = sorted(k for k in surplus - set(macros) if k not in resolved)

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


def cut_sbom(cdx_json, bootstrap, root=ROOT):
    """cargo-cyclonedx's SBOM (CDX_JSON, its text) cut to the crates compiled
    into BOOTSTRAP, the bootstrap's SHA-256 on the function's component, and
    the clone's absolute path out of the references, through
    cyclonedx-python-lib. Returns (the SBOM's JSON text, problems)."""
    from cyclonedx.model import HashAlgorithm, HashType, Property
    from cyclonedx.model.bom import Bom
    from cyclonedx.model.bom_ref import BomRef
    from cyclonedx.model.dependency import Dependency
    from cyclonedx.output.json import JsonV1Dot5

    target = elf_target(bootstrap)
    compiled = compiled_in(target, root)
    name, version = root_package(root)
    bom = Bom.from_json(json.loads(cdx_json))
    problems = []
    prefix = "path+" + (root.as_uri())

    def local(ref):
        return ref.replace(prefix, "path+file://.")

    kept = []
    for c in bom.components:
        if (c.name, c.version) not in compiled:
            continue
        purl = str(c.purl or "")
        if not c.licenses:
            problems.append(f"{c.name} {c.version}: no licence in the SBOM")
        if not c.hashes and purl.startswith("pkg:cargo/") and "download_url=file" not in purl:
            problems.append(f"{c.name} {c.version}: no hash in the SBOM")
        c.bom_ref.value = local(c.bom_ref.value)
        kept.append(c)
    listed = {(c.name, c.version) for c in kept} | {(name, version)}
    problems += [f"{n} {v} is compiled in but not in the SBOM" for n, v in sorted(compiled - listed)]
    bom.components = kept

    app = bom.metadata.component
    app.bom_ref.value = local(app.bom_ref.value)
    for sub in app.components:
        sub.bom_ref.value = local(sub.bom_ref.value)
    digest = hashlib.sha256(Path(bootstrap).read_bytes()).hexdigest()
    app.hashes = [HashType(alg=HashAlgorithm.SHA_256, content=digest)]
    app.properties.add(Property(name="plant-store:bootstrap:sha256", value=digest))
    # The library would give the document a random serial number: one named
    # after the bootstrap keeps the SBOM of one build the same bytes.
    bom.serial_number = uuid.uuid5(uuid.NAMESPACE_URL, f"{app.purl}#sha256:{digest}")

    refs = {c.bom_ref.value for c in kept} | {app.bom_ref.value}
    bom.dependencies = [
        Dependency(
            ref=BomRef(local(d.ref.value)),
            dependencies=[
                Dependency(ref=BomRef(local(x.ref.value))) for x in d.dependencies if local(x.ref.value) in refs
            ],
        )
        for d in bom.dependencies
        if local(d.ref.value) in refs
    ]
    return JsonV1Dot5(bom).output_as_string(indent=2) + "\n", problems


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
            sbom, problems = cut_sbom(Path(args[1]).read_text(), Path(args[0]))
            Path(args[2]).write_text(sbom)
            print(f"wrote {args[2]}: {len(json.loads(sbom)['components'])} crates compiled into {args[0]}")
        elif command == "elf" and len(args) == 2:
            found = elf_target(args[0])
            problems = [] if found == args[1] else [f"{args[0]} is an executable for {found}, not {args[1]}"]
            if not problems:
                print(f"ok   {args[0]} is an ELF executable for {found}")
        elif command == "version" and not args:
            problems = []
            print(root_package()[1])
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
