#!/usr/bin/env bash
# The versions agree (README, "Versions"):
# - Cargo.toml's version (the release of this implementation) has the same
#   MAJOR.MINOR as openapi.yaml's info.version (the API contract);
# - CHANGELOG.md has an [Unreleased] section, and its newest release heading
#   is Cargo.toml's version;
# - every GitHub workflow that names the Rust toolchain (RUST_VERSION) names
#   the same one: CI tests with the toolchain the release is built with.
# Prints one line per check and exits 1 at the first disagreement.
set -euo pipefail
cd "$(dirname "$0")/.."

fail() {
    echo "FAIL $1" >&2
    exit 1
}
semver='[0-9]+\.[0-9]+\.[0-9]+'

# The [package] table's version, read with tomllib (as the release's files are named).
crate=$(python3 scripts/supply_chain.py version)
# The `version:` line of the top-level `info:` mapping.
contract=$(awk '/^[^ #]/ { in_info = ($0 ~ /^info:/) }
                in_info && /^  version:/ { sub(/^  version: */, ""); gsub(/["'\'']/, ""); print; exit }' openapi.yaml)
[[ $crate =~ ^$semver$ ]] || fail "Cargo.toml: no MAJOR.MINOR.PATCH version in [package] (found '$crate')"
[[ $contract =~ ^$semver$ ]] || fail "openapi.yaml: no MAJOR.MINOR.PATCH info.version (found '$contract')"
[ "${crate%.*}" = "${contract%.*}" ] \
    || fail "Cargo.toml version $crate and openapi.yaml info.version $contract differ in MAJOR.MINOR"
echo "ok   Cargo.toml $crate implements the contract openapi.yaml $contract (same MAJOR.MINOR)"

grep -Eq '^## \[Unreleased\]$' CHANGELOG.md || fail "CHANGELOG.md has no '## [Unreleased]' section"
released=$(grep -Eo "^## \[$semver\] - [0-9]{4}-[0-9]{2}-[0-9]{2}$" CHANGELOG.md | head -n 1 || true)
[ -n "$released" ] || fail "CHANGELOG.md has no release heading '## [X.Y.Z] - YYYY-MM-DD'"
newest=${released#'## ['}
newest=${newest%%]*}
[ "$newest" = "$crate" ] \
    || fail "CHANGELOG.md's newest release is $newest but Cargo.toml says $crate: add its section (or bump Cargo.toml)"
echo "ok   CHANGELOG.md's newest release is $crate"

# The workflows' top-level `env:` entry, `  RUST_VERSION: "X.Y"`: one line of
# a fixed shape in files GitHub's schema already checks (make lint-ci), so a
# grep reads it; the lint tools' YAML library is not on this script's Python.
toolchains=$(grep -hE '^  RUST_VERSION: ' .github/workflows/*.yml | sed -E 's/^  RUST_VERSION: *"?([^"]*)"?.*$/\1/' | sort -u)
[ -n "$toolchains" ] || fail "no workflow in .github/workflows names RUST_VERSION"
[ "$(wc -l <<< "$toolchains")" -eq 1 ] \
    || fail "the workflows name different Rust toolchains (RUST_VERSION): $(tr '\n' ' ' <<< "$toolchains")"
echo "ok   every workflow builds with Rust $toolchains (RUST_VERSION)"
