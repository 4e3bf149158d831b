// Drives an MCP server (the gateway) over Streamable HTTP with the official TypeScript SDK
// (`@modelcontextprotocol/sdk` 1.32.2, installed into .peers/node by tests/setup-peers.sh):
//
//     node ts_client.mjs PEERS_NODE_DIR URL API_KEY OPTIONS_JSON
//
// PEERS_NODE_DIR  the folder holding node_modules/@modelcontextprotocol/sdk (.peers/node)
// URL             the MCP endpoint, or `stdio:` + JSON {"command", "args", "env"} to start a stdio server
//                 (its environment: PATH, HOME and `env`, as the gateway gives its stdio upstreams)
// API_KEY         sent as `Authorization: Bearer API_KEY`; `-` sends none
// OPTIONS_JSON    {"steps": [...], "capabilities": {...}}
//   steps:        {"op": "list"}                                   -> {"tools": [{name, description, inputSchema,
//                                                                       outputSchema}]}
//                 {"op": "call", "name": "...", "arguments": {...}} -> {"is_error", "content": [text...],
//                                                                       "content_blocks", "structured_content"}
//                 a step the SDK rejects records {"error": {"code", "message"}}
//   capabilities: what the client declares, each with the answer it gives when asked:
//                 {"sampling": "reply text", "elicitation": {"action": "accept", "content": {...}},
//                  "roots": [{"uri": "file:///...", "name": "..."}]}
//
// Prints one JSON object and exits 0: {"protocol_version", "results": [...], "asked": {"sampling": n,
// "elicitation": n, "roots": n}, "requests": {"sampling": [...params], ...}}; or {"connect_error": "...",
// "connect_error_code": HTTP status or JSON-RPC code} when connecting fails.

import { join } from 'node:path';
import { pathToFileURL } from 'node:url';

const [peers, url, key, optionsJson] = process.argv.slice(2);
if (!optionsJson) {
    console.error('usage: node ts_client.mjs PEERS_NODE_DIR URL API_KEY OPTIONS_JSON');
    process.exit(2);
}
const options = JSON.parse(optionsJson);
const sdk = (path) =>
    import(pathToFileURL(join(peers, 'node_modules/@modelcontextprotocol/sdk/dist/esm', path)).href);
const { Client } = await sdk('client/index.js');
const { StreamableHTTPClientTransport } = await sdk('client/streamableHttp.js');
const { StdioClientTransport } = await sdk('client/stdio.js');
const types = await sdk('types.js');

const wants = options.capabilities ?? {};
const capabilities = {};
if (wants.sampling !== undefined) capabilities.sampling = {};
if (wants.elicitation !== undefined) capabilities.elicitation = {};
if (wants.roots !== undefined) capabilities.roots = { listChanged: false };

const asked = { sampling: 0, elicitation: 0, roots: 0 };
const requests = { sampling: [], elicitation: [], roots: [] };
const client = new Client({ name: 'narrowgate-ts-test', version: '1.0.0' }, { capabilities });
if (capabilities.sampling) {
    client.setRequestHandler(types.CreateMessageRequestSchema, async (request) => {
        asked.sampling += 1;
        requests.sampling.push(request.params);
        return { role: 'assistant', content: { type: 'text', text: wants.sampling }, model: 'ts-test-model' };
    });
}
if (capabilities.elicitation) {
    client.setRequestHandler(types.ElicitRequestSchema, async (request) => {
        asked.elicitation += 1;
        requests.elicitation.push(request.params);
        return wants.elicitation;
    });
}
if (capabilities.roots) {
    client.setRequestHandler(types.ListRootsRequestSchema, async (request) => {
        asked.roots += 1;
        requests.roots.push(request.params ?? {});
        return { roots: wants.roots };
    });
}

const headers = key === '-' ? {} : { Authorization: `Bearer ${key}` };
function stdioTransport(spec) {
    const env = {};
    for (const k of ['PATH', 'HOME']) if (process.env[k] !== undefined) env[k] = process.env[k];
    Object.assign(env, spec.env ?? {});
    return new StdioClientTransport({ command: spec.command, args: spec.args ?? [], env, stderr: 'inherit' });
}
const transport = url.startsWith('stdio:')
    ? stdioTransport(JSON.parse(url.slice('stdio:'.length)))
    : new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers } });
const timeout = Number(process.env.TS_CLIENT_TIMEOUT ?? '20') * 1000;

function rpcError(e) {
    if (e && typeof e.code === 'number') return { error: { code: e.code, message: e.message } };
    return { exception: { type: e?.name ?? 'Error', message: String(e?.message ?? e) } };
}

try {
    await client.connect(transport, { timeout });
} catch (e) {
    // The SDK's StreamableHTTPError carries the HTTP status as `code`.
    console.log(JSON.stringify({ connect_error: String(e?.message ?? e), connect_error_code: e?.code ?? null }));
    process.exit(0);
}

const results = [];
for (const step of options.steps ?? []) {
    try {
        if (step.op === 'list') {
            const listed = await client.listTools(undefined, { timeout });
            results.push({
                tools: listed.tools.map((t) => ({
                    name: t.name,
                    description: t.description,
                    inputSchema: t.inputSchema,
                    outputSchema: t.outputSchema,
                    _meta: t._meta,
                })),
            });
        } else if (step.op === 'call') {
            const r = await client.callTool({ name: step.name, arguments: step.arguments ?? {} }, undefined, {
                timeout,
            });
            results.push({
                is_error: r.isError === true,
                content: (r.content ?? []).filter((b) => b.type === 'text').map((b) => b.text),
                content_blocks: r.content ?? [],
                structured_content: r.structuredContent ?? null,
            });
        } else if (step.op === 'resources') {
            const resources = [];
            let cursor;
            do {
                const page = await client.listResources(cursor === undefined ? undefined : { cursor }, { timeout });
                resources.push(...page.resources);
                cursor = page.nextCursor;
            } while (cursor !== undefined);
            results.push({ resources });
        } else if (step.op === 'read') {
            const r = await client.readResource({ uri: step.uri }, { timeout });
            results.push({ contents: r.contents });
        } else {
            results.push({ exception: { type: 'BadStep', message: `unknown op ${step.op}` } });
        }
    } catch (e) {
        results.push(rpcError(e));
    }
}

const protocol_version = transport.protocolVersion ?? null;
try {
    if (transport.terminateSession) await transport.terminateSession();
} catch {
    // The session may already be gone; the results are what matters.
}
await client.close();
console.log(JSON.stringify({ protocol_version, results, asked, requests }));
