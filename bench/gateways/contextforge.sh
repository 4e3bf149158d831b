# ContextForge (`mcp-contextforge-gateway` 1.0.7 from PyPI) as a comparison gateway for bench/run.sh.
# Sourced by run.sh (--with-contextforge); also usable alone:
#
#   source bench/gateways/contextforge.sh && contextforge_install
#
# Installed once into a venv under ~/.cache/narrowgate-bench/contextforge (about 250 MB, a minute or
# two). Each run starts it with a fresh SQLite database in the run's scratch folder, as one uvicorn
# process on a free loopback port, and registers the demo upstream through its REST API
# (POST /gateways, transport STREAMABLEHTTP). Its tools are then named `demo-weather`, `demo-add`.
#
# Settings that matter for a fair comparison:
#   SSRF_ALLOW_LOCALHOST=true      otherwise it refuses a loopback upstream
#   RATE_LIMITING_ENABLED=false    otherwise it limits MCP calls to 100 per minute
#   AUTH_REQUIRED=true             clients send a JWT (made with its own create_jwt_token tool)
#   LOG_LEVEL=ERROR                its default
# Left at their defaults: USE_STATEFUL_SESSIONS=false (it answers 2025-11-25 clients without a
# session) and JSON_RESPONSE_ENABLED=true. It does not speak 2026-07-28 (it answers 400
# "Unsupported protocol version"), so only the legacy scenarios run against it.

CF_VERSION=1.0.7
CF_HOME=${NARROWGATE_BENCH_CACHE:-$HOME/.cache/narrowgate-bench}/contextforge

contextforge_install() {
    local installed=""
    [ -x "$CF_HOME/bin/pip" ] && installed=$("$CF_HOME/bin/pip" show mcp-contextforge-gateway 2>/dev/null || true)
    if [ -x "$CF_HOME/bin/mcpgateway" ] && grep -qx "Version: $CF_VERSION" <<<"$installed"; then
        return 0
    fi
    echo "installing mcp-contextforge-gateway $CF_VERSION into $CF_HOME" >&2
    python3 -m venv "$CF_HOME"
    "$CF_HOME/bin/pip" install --quiet "mcp-contextforge-gateway==$CF_VERSION"
}

# contextforge_start LEGACY_UPSTREAM_URL STATELESS_UPSTREAM_URL
# Sets CF_PID, CF_URL_LEGACY, CF_URL_STATELESS (-: not supported), CF_TOOL_LEGACY, CF_TOOL_STATELESS, CF_TOKEN.
contextforge_start() {
    local upstream=$1
    contextforge_install
    local dir="$WORK/contextforge" port secret
    mkdir -p "$dir"
    port=$(free_port)
    secret="narrowgate-bench-$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')"
    # Its settings come from the environment (it refuses to start with placeholder secrets).
    local settings=(HOST=127.0.0.1 PORT="$port"
        DATABASE_URL="sqlite:///$dir/mcp.db"
        JWT_SECRET_KEY="$secret" AUTH_ENCRYPTION_SECRET="$secret-enc"
        PLATFORM_ADMIN_EMAIL=admin@example.com PLATFORM_ADMIN_PASSWORD="Bench-$secret"
        BASIC_AUTH_PASSWORD="Bench-$secret" AUTH_REQUIRED=true
        SSRF_ALLOW_LOCALHOST=true RATE_LIMITING_ENABLED=false
        MCPGATEWAY_UI_ENABLED=false MCPGATEWAY_ADMIN_API_ENABLED=false LOG_LEVEL=ERROR)
    (cd "$dir" && exec env "${settings[@]}" "$CF_HOME/bin/mcpgateway" --host 127.0.0.1 --port "$port") \
        >"$dir/contextforge.log" 2>&1 &
    CF_PID=$!
    PIDS+=("$CF_PID")   # run.sh stops it on exit, even if the set-up below fails
    local base="http://127.0.0.1:$port"
    for _ in $(seq 300); do
        curl -fsS --max-time 1 "$base/health" >/dev/null 2>&1 && break
        kill -0 "$CF_PID" 2>/dev/null || die "ContextForge exited; see $dir/contextforge.log"
        sleep 1
    done
    curl -fsS --max-time 2 "$base/health" >/dev/null || die "ContextForge not healthy after 300 s; see $dir/contextforge.log"
    CF_TOKEN=$(cd "$dir" && env "${settings[@]}" "$CF_HOME/bin/python" -m mcpgateway.utils.create_jwt_token \
        --username admin@example.com --exp 240 --secret "$secret" 2>"$dir/token.err" | tail -n 1) \
        || die "cannot make a ContextForge token; see $dir/token.err"
    [ -n "$CF_TOKEN" ] || die "cannot make a ContextForge token; see $dir/token.err"
    curl -fsS --max-time 30 -X POST "$base/gateways" -H "Authorization: Bearer $CF_TOKEN" \
        -H 'content-type: application/json' \
        -d "{\"name\":\"demo\",\"url\":\"$upstream\",\"transport\":\"STREAMABLEHTTP\"}" >"$dir/register.json" \
        || die "ContextForge refused the upstream registration; see $dir/register.json"
    for _ in $(seq 60); do
        curl -fsS --max-time 5 "$base/tools" -H "Authorization: Bearer $CF_TOKEN" 2>/dev/null \
            | grep -q '"demo-weather"' && break
        sleep 0.5
    done
    CF_URL_LEGACY="$base/mcp/"
    CF_URL_STATELESS=-
    CF_TOOL_LEGACY='demo-{}'
    CF_TOOL_STATELESS=-
    log "ContextForge $CF_VERSION ready at $CF_URL_LEGACY (pid $CF_PID)"
}
