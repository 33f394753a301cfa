"""The implementations measured and how their peers are installed, with the paths, `log` and `fail` bench/ shares."""

import dataclasses
import functools
import glob
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile

from proxy import SYSTEM_BUNDLE_CANDIDATES

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)

TOKEN_SHA256 = hashlib.sha256(b"plant-store-dev-token").hexdigest()
TOOLS = os.path.join(REPO, ".tools", "bench")
PY_VENV = os.path.join(TOOLS, "python")
NODE_DIR = os.path.join(TOOLS, "node")
PEERS = os.path.join(HERE, "peers")
PY_REQUIREMENTS = os.path.join(PEERS, "python", "requirements.txt")
RUST_PEER_DIR = os.path.join(PEERS, "rust")
RUST_PEER_TARGET = os.path.join(TOOLS, "rust-target")
RUST_PEER_BIN = os.path.join(RUST_PEER_TARGET, "release", "plant-store-bench-rust-peer")
SYSTEM_BUNDLE = next((p for p in SYSTEM_BUNDLE_CANDIDATES if os.path.isfile(p)), None)


def log(message):
    print(message, file=sys.stderr, flush=True)


def fail(message):
    raise SystemExit(f"error: {message}")


def _digest(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def _stamp(folder, digest):
    return os.path.join(folder, ".stamp-" + digest[:16])


def rust_peer_stamp():
    """The idiomatic peer's build stamp, keyed on its manifest, lock file and source."""
    digests = "".join(
        _digest(os.path.join(RUST_PEER_DIR, name)) for name in ("Cargo.toml", "Cargo.lock", "src/main.rs")
    )
    return _stamp(RUST_PEER_TARGET, hashlib.sha256(digests.encode()).hexdigest())


def rust_peer_built():
    return os.path.exists(rust_peer_stamp()) and os.path.isfile(RUST_PEER_BIN)


def build_rust_peer():
    """Builds the idiomatic Rust peer (crates.io only, its own Cargo.lock)
    into .tools/bench/rust-target, as its own workspace, with none of this
    repository's cargo settings: cargo reads `.cargo/config.toml` from the
    working directory upwards (not from the manifest's folder), so the build
    runs in a scratch folder outside the repository, and the environment
    loses any AWS_LC_SYS_* and CARGO_PROFILE_* settings. The first build
    takes several minutes (the SDK's default features)."""
    if shutil.which("cargo") is None:
        fail("cargo is needed for the idiomatic Rust peer: install Rust with rustup")
    log("building the idiomatic Rust peer into .tools/bench/rust-target (several minutes the first time)")
    skip = ("AWS_LC_SYS_", "CARGO_PROFILE_", "CARGO_BUILD_", "CARGO_ENCODED_RUSTFLAGS", "RUSTFLAGS", "CARGO_TARGET_DIR")
    env = {k: v for k, v in os.environ.items() if not k.startswith(skip[:4]) and k not in skip[4:]}
    cargo = ["nice", "-n", "10", "cargo", "build", "--release", "--locked", "--target-dir", RUST_PEER_TARGET]
    with tempfile.TemporaryDirectory(prefix="plant-store-peer-build-") as outside:
        manifest = os.path.join(RUST_PEER_DIR, "Cargo.toml")
        subprocess.run([*cargo, "--manifest-path", manifest], cwd=outside, env=env, check=True)


def install_python_peer():
    log("installing the Python peer's dependencies (boto3) into .tools/bench/python")
    if not os.path.exists(os.path.join(PY_VENV, "bin", "python")):
        subprocess.run([sys.executable, "-m", "venv", PY_VENV], check=True)
    pip = [os.path.join(PY_VENV, "bin", "python"), "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
    subprocess.run([*pip, "--no-input", "--require-hashes", "--no-deps", "-r", PY_REQUIREMENTS], check=True)


def install_node_peer():
    log("installing the Node.js peer's dependencies (@aws-sdk/client-dynamodb) into .tools/bench/node")
    os.makedirs(NODE_DIR, exist_ok=True)
    for name in ("package.json", "package-lock.json"):
        shutil.copy(os.path.join(PEERS, "node", name), NODE_DIR)
    subprocess.run(["npm", "ci", "--no-audit", "--no-fund", "--loglevel=error"], cwd=NODE_DIR, check=True)


def install_peers(impls, build_rust=True):
    """Installs the peers' pinned dependencies into .tools/bench/ (PyPI and
    npm only) and builds the idiomatic Rust peer (unless `build_rust` is
    false), each once per change of what it is made from: a stamp named
    after its digest marks the folder it went into."""
    if "node" in impls and not (shutil.which("node") and shutil.which("npm")):
        fail("node and npm are needed for the Node.js peer: install Node.js 20+")
    for impl, stamp, made, install in (
        ("idiomatic", rust_peer_stamp(), os.path.isfile(RUST_PEER_BIN), build_rust_peer),
        ("python", _stamp(PY_VENV, _digest(PY_REQUIREMENTS)), True, install_python_peer),
        ("node", _stamp(NODE_DIR, _digest(os.path.join(PEERS, "node", "package-lock.json"))), True, install_node_peer),
    ):
        if impl in impls and (build_rust or impl != "idiomatic") and not (os.path.exists(stamp) and made):
            install()
            for old in glob.glob(os.path.join(os.path.dirname(stamp), ".stamp-*")):
                os.remove(old)
            open(stamp, "w").close()
    if "node" in impls:  # the handler beside its node_modules, as in a deployment package
        for name in ("bootstrap.js", "handler.js"):
            shutil.copy(os.path.join(PEERS, "node", name), NODE_DIR)


def dir_size(path, skip=()):
    total = 0
    for root, dirs, files in os.walk(path):
        dirs[:] = [d for d in dirs if d not in skip]
        paths = (os.path.join(root, name) for name in files)
        total += sum(os.path.getsize(p) for p in paths if not os.path.islink(p))
    return total


@dataclasses.dataclass
class Subject:
    """One implementation as run: argv, extra environment, how a Rust build
    loads its CAs (`certs`), whether every answer must echo
    Lambda-Runtime-Invocation-Id (an older build can be measured with
    echo=optional), and whether Lambda samples every invocation for X-Ray
    (`sampled`, xray=sampled: the `traced` row)."""

    name: str
    kind: str
    argv: list
    env: dict = dataclasses.field(default_factory=dict)
    certs: str | None = None
    size_bytes: int | None = None
    size_note: str = ""
    echo: bool = True
    sampled: bool = False
    names_request: bool = True

    def environment(self, transport, endpoint, certs, table):
        env = {"TABLE_NAME": table, "PLANTS_TOKEN_SHA256": TOKEN_SHA256, "AWS_ENDPOINT_URL_DYNAMODB": endpoint}
        if transport == "http" and self.kind == "rust" and self.certs == "file" and SYSTEM_BUNDLE:
            # As deployed (template.yaml): the SDK builds its TLS connector
            # at start-up whatever the endpoint, reading this one file.
            env["SSL_CERT_FILE"] = SYSTEM_BUNDLE
        if transport == "https":
            trust = {
                # AWS_CA_BUNDLE for builds that trust only the CAs they are
                # given (crates/lambda-host/src/sdk.rs), SSL_CERT_FILE for earlier builds.
                "rust": {"AWS_CA_BUNDLE": certs["ca"], "SSL_CERT_FILE": certs["bundle"]},
                "python": {"AWS_CA_BUNDLE": certs["bundle"]},
                "node": {"NODE_EXTRA_CA_CERTS": certs["ca"]},
            }
            env.update(trust[self.kind])
            if self.kind == "rust" and self.certs == "dir":
                # What rustls-native-certs does with no variable set: the
                # bundle file and every file of the directory.
                env["SSL_CERT_DIR"] = certs["certdir"]
        return env | self.env


RUST_SETTINGS = {"certs": ("file", "dir"), "echo": ("required", "optional"), "xray": ("sampled", "unsampled")}
# (the rest is environment)


def rust_subject(name, binary, settings=()):
    """A Rust build: the one built here, or `--rust NAME=BINARY[,KEY=VALUE...]`."""
    if not os.path.isfile(binary):
        fail(f"no binary at {binary}")
    subject = Subject(name, "rust", [os.path.abspath(binary)], {}, "file", os.path.getsize(binary), "stripped binary")
    for setting in settings:
        key, sep, value = setting.partition("=")
        if not sep:
            fail(f"--rust setting {setting!r} is not KEY=VALUE")
        if value not in RUST_SETTINGS.get(key, (value,)):
            fail(f"--rust {key}= takes {' or '.join(RUST_SETTINGS[key])}")
        if key == "certs":
            subject.certs = value
        elif key == "echo":
            subject.echo = value == "required"
        elif key == "xray":
            subject.sampled = value == "sampled"
        else:
            subject.env[key] = value
    return subject


def stripped_size(binary):
    """The size the binary would have stripped (as deployment tools strip
    it); the file's own size when `strip` is missing."""
    if shutil.which("strip") is None:
        return os.path.getsize(binary)
    with tempfile.TemporaryDirectory() as scratch:
        subprocess.run(["strip", "-o", os.path.join(scratch, "stripped"), binary], check=True)
        return os.path.getsize(os.path.join(scratch, "stripped"))


@functools.cache
def cargo_target_dir():
    """Where cargo builds this workspace: `CARGO_TARGET_DIR` or a
    configured `build.target-dir` when either is set, else target/, as
    `cargo metadata` resolves them."""
    out = subprocess.run(
        ["cargo", "metadata", "--format-version", "1", "--no-deps"],
        cwd=REPO,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return json.loads(out)["target_directory"]


def build_rust(profile):
    args = ["cargo", "build", "--bin", "plant-store"] + (["--release"] if profile == "release" else [])
    log("building: " + " ".join(args))
    subprocess.run(args, cwd=REPO, check=True)
    return os.path.join(cargo_target_dir(), profile, "plant-store")


FLOOR_DIR = os.path.join(HERE, "floor")


def build_floor(profile="release"):
    """bench/floor (docs/performance.md, "The floor"), built in this
    repository (so that its .cargo/config.toml applies, as it does to
    plant-store) into its target folder, where it reuses the dependencies
    plant-store's own build compiled: seconds after `cargo build
    --release`, not minutes."""
    log(f"building bench/floor ({profile})")
    manifest = os.path.join(FLOOR_DIR, "Cargo.toml")
    target = cargo_target_dir()
    cargo = ["cargo", "build", "--locked", "--manifest-path", manifest, "--target-dir", target]
    cargo += ["--bin", "plant-store-bench-floor"]  # not src/bin/parts.rs, which is built by hand for callgrind
    subprocess.run(cargo + (["--release"] if profile == "release" else []), cwd=REPO, check=True)
    return os.path.join(target, profile, "plant-store-bench-floor")


def floor_subject(binary):
    """The warm floor (bench/floor, `FLOOR_UNTIL=loop`): the Runtime API and
    one PutItem per invocation, nothing of plant-store's own; its fixed
    answer passes `check_created` but names no request id."""
    subject = rust_subject("floor", binary, ["FLOOR_UNTIL=loop"])
    subject.names_request = False
    return subject


def peer_subject(binary=RUST_PEER_BIN):
    """The idiomatic Rust peer (`lambda_http`, `make bench` builds it), its
    CAs from the one file as for plant-store."""
    if not os.path.isfile(binary):
        fail(f"no idiomatic peer at {binary}: make bench builds it")
    size, note = stripped_size(binary), "binary of the default release profile, stripped"
    return Subject("idiomatic", "rust", [os.path.abspath(binary)], certs="file", size_bytes=size, size_note=note)


def subjects_for(args):
    subjects = []
    if ("rust" in args.impl or "traced" in args.impl) and not args.rust:
        binary = args.binary or build_rust("debug" if args.smoke else "release")
        if "rust" in args.impl:
            subjects.append(rust_subject("rust", binary))
        if "traced" in args.impl:
            # The same build with every invocation sampled: what its
            # spans cost (crates/lambda-host/src/trace/).
            subjects.append(rust_subject("traced", binary, ["xray=sampled"]))
    for spec in (args.rust or []) if "rust" in args.impl else []:
        name, sep, rest = spec.partition("=")
        if not sep:
            fail(f"--rust {spec!r}: use NAME=BINARY[,KEY=VALUE...]")
        binary, *settings = rest.split(",")
        subjects.append(rust_subject(name, binary, settings))
    if "floor" in args.impl and not args.smoke:
        # The smoke's conformance cases are plant-store's; the floor answers
        # every event alike. Built with the profile of the plant-store
        # build it is compared with (a debug build's folder: debug).
        profile = "debug" if args.binary and os.path.basename(os.path.dirname(args.binary)) == "debug" else "release"
        subjects.append(floor_subject(build_floor(profile)))
    if "idiomatic" in args.impl and not rust_peer_built():
        print("skip idiomatic: the idiomatic Rust peer is not built (make bench builds it)", flush=True)
    elif "idiomatic" in args.impl:
        subjects.append(peer_subject())
    if "python" in args.impl:
        argv = [os.path.join(PY_VENV, "bin", "python"), os.path.join(PEERS, "python", "bootstrap.py")]
        size = dir_size(os.path.join(PY_VENV, "lib"), skip=("pip", "setuptools", "_distutils_hack", "pkg_resources"))
        subjects.append(Subject("python", "python", argv, size_bytes=size, size_note="boto3 and its dependencies"))
    if "node" in args.impl:
        argv, size = ["node", os.path.join(NODE_DIR, "bootstrap.js")], dir_size(os.path.join(NODE_DIR, "node_modules"))
        subjects.append(Subject("node", "node", argv, size_bytes=size, size_note="node_modules"))
    return subjects
