#!/usr/bin/env bash
# The same commit gives the same bytes (make reproducible; docs/supply-chain.md).
#
# Build A is what `sam build` left in .aws-sam/ (make sam-check ran it, in
# this clone, into a target directory of its own, SAM_TARGET_DIR, that was
# empty: the Makefile rebuilds it from nothing when it was not, and the
# GitHub workflow never caches it). Build B is the same `sam build` in a
# second clone of the commit at another path (`git clone` of this one, then
# the commit checked out: CI's checkout of a pull request is a detached,
# shallow commit, which a local clone carries), with a target directory of
# its own that starts empty. Both bootstraps and both deployment zips (made
# as `sam deploy` makes them) must be byte-identical. Each target directory
# saw one build only, so what rustc compiled there is also held against what
# the supply-chain checks take as compiled in (cargo tree).
#
# Needs: PYTHON (the tool venv's, with the SAM CLI), SAM (how to run sam),
# SAM_ARCH (the template's Architecture), SAM_TARGET_DIR (build A's target
# directory), and cargo lambda, zig and cargo-auditable on PATH, as the
# Makefile sets them.
set -euo pipefail
cd "$(dirname "$0")/.."
: "${PYTHON:?}" "${SAM_ARCH:?}" "${SAM_TARGET_DIR:?}"
read -r -a sam <<< "${SAM:?}"

fail() {
    echo "error: $1" >&2
    exit 1
}
built_a=.aws-sam/build/PlantsFunction
[ -x "$built_a/bootstrap" ] || fail "$built_a/bootstrap is missing: make sam-check builds it"
# Build A is of the working tree: it is a build of HEAD only when nothing
# tracked differs from it.
if ! git diff --quiet HEAD --; then
    fail "the working tree differs from HEAD: commit or stash first (make reproducible compares two builds of one commit)"
fi
commit=$(git rev-parse HEAD)

scratch=$(mktemp -d -t plant-store-reproducible.XXXXXX)
trap 'rm -rf "$scratch"' EXIT
# A longer, different path than this clone's, so that a path leaking into the
# bytes shows.
clone="$scratch/second-clone-at-another-path/plant-store"
git clone --quiet --no-checkout . "$clone"
git -C "$clone" -c advice.detachedHead=false checkout --quiet --detach "$commit"

echo "build B: sam build of $commit in a second clone at another path, target directory empty (several minutes)"
start=$(date +%s)
(
    cd "$clone"
    CARGO_TARGET_DIR="$scratch/target-b" "${sam[@]}" build --template template.yaml \
        --parameter-overrides "Architecture=$SAM_ARCH" > "$scratch/build-b.log" 2>&1
) || {
    tail -n 30 "$scratch/build-b.log" >&2
    fail "sam build in the second clone failed (its log's end is above)"
}
echo "build B took $(($(date +%s) - start)) s"
built_b="$clone/.aws-sam/build/PlantsFunction"

# The zips as `sam deploy` uploads them; `make deploy` sets this mode too.
chmod 0755 "$built_a/bootstrap" "$built_b/bootstrap"
"$PYTHON" scripts/supply_chain.py zip "$built_a" "$scratch/a.zip" > "$scratch/a.sum"
"$PYTHON" scripts/supply_chain.py zip "$built_b" "$scratch/b.zip" > "$scratch/b.sum"

status=0
for what in bootstrap zip; do
    case $what in
        bootstrap) a="$built_a/bootstrap" b="$built_b/bootstrap" ;;
        zip) a="$scratch/a.zip" b="$scratch/b.zip" ;;
    esac
    sum_a=$(sha256sum "$a" | cut -d' ' -f1)
    sum_b=$(sha256sum "$b" | cut -d' ' -f1)
    if [ "$sum_a" = "$sum_b" ]; then
        echo "ok   the $what is byte-identical in both builds: sha256 $sum_a"
    else
        echo "FAIL the $what differs: A $sum_a, B $sum_b ($(cmp "$a" "$b" | head -n 1))" >&2
        status=1
    fi
done
echo "     Lambda's CodeSha256 of this commit's $SAM_ARCH zip: $(sed -n 's/.*CodeSha256: \(.*\))$/\1/p' "$scratch/a.sum")"
for side in "A $SAM_TARGET_DIR $built_a" "B $scratch/target-b $built_b"; do
    read -r name target_dir built <<< "$side"
    echo -n "build $name: "
    "$PYTHON" scripts/supply_chain.py built "$target_dir" "$built/bootstrap" || status=1
done
exit $status
