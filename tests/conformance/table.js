// Summarises the result folders of `conformance server -o DIR` runs (tests/conformance/run.sh):
//
//   node table.js RESULTS_TSV DIRECT_DIR DIRECT_LOG [GATEWAY_DIR GATEWAY_LOG]
//
// A scenario passes when it recorded at least one check and none has status FAILURE (the suite's
// own rule: WARNING and INFO do not fail it). A scenario that the suite's summary names but that
// wrote no checks.json (it crashed) fails. Prints a table (scenario, direct, through gateway, and
// the first failure message of the gateway run), writes it as TSV to RESULTS_TSV, and exits
//   0  every scenario passes directly, and none that passes directly fails through the gateway
//   1  some scenario passes directly and fails through the gateway
//   2  some scenario fails directly (the fixture upstream or the setup is broken)
"use strict";
const fs = require("fs");
const path = require("path");

const [tsvPath, directDir, directLog, gatewayDir, gatewayLog] = process.argv.slice(2);
if (!tsvPath || !directDir || !directLog) {
  console.error("usage: node table.js RESULTS_TSV DIRECT_DIR DIRECT_LOG [GATEWAY_DIR GATEWAY_LOG]");
  process.exit(2);
}

// Result folders are named server-<scenario>-<ISO timestamp with dashes>.
const FOLDER = /^server-(.+)-(\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2}-\d{3}Z)$/;
// Summary lines: "✓ tools-list: 1 passed, 0 failed" (✗ when some check failed).
const SUMMARY = /^[✓✗] (\S+): \d+ passed, \d+ failed$/u;

/** scenario -> {pass, message}, in the order the suite ran them. */
function load(dir, log) {
  const runs = [];
  for (const name of fs.existsSync(dir) ? fs.readdirSync(dir) : []) {
    const m = FOLDER.exec(name);
    if (m) runs.push({ scenario: m[1], stamp: m[2], file: path.join(dir, name, "checks.json") });
  }
  runs.sort((a, b) => a.stamp.localeCompare(b.stamp));
  const results = new Map();
  for (const run of runs) {
    let checks;
    try {
      checks = JSON.parse(fs.readFileSync(run.file, "utf8"));
    } catch (e) {
      results.set(run.scenario, { pass: false, message: `no readable checks.json (${e.message})` });
      continue;
    }
    const failed = checks.filter((c) => c.status === "FAILURE");
    const pass = checks.length > 0 && failed.length === 0;
    const first = failed[0];
    const message = pass ? "" : first ? `${first.id}: ${first.errorMessage || first.description}` : "no checks recorded";
    results.set(run.scenario, { pass, message });
  }
  const text = fs.existsSync(log) ? fs.readFileSync(log, "utf8") : "";
  for (const line of text.split("\n")) {
    const m = SUMMARY.exec(line.trim());
    if (m && !results.has(m[1])) results.set(m[1], { pass: false, message: "the suite wrote no results (see its log)" });
  }
  return results;
}

const direct = load(directDir, directLog);
const gateway = gatewayDir ? load(gatewayDir, gatewayLog) : null;
if (direct.size === 0) {
  console.error(`table.js: no scenario results in ${directDir}; the suite's log: ${directLog}`);
  process.exit(2);
}
const scenarios = [...direct.keys()];
if (gateway) for (const s of gateway.keys()) if (!direct.has(s)) scenarios.push(s);

const word = (r) => (r === undefined ? "-" : r.pass ? "pass" : "FAIL");
const oneLine = (s) => s.replace(/\s+/g, " ").slice(0, 160);
const rows = scenarios.map((s) => {
  const d = direct.get(s);
  const g = gateway ? gateway.get(s) : undefined;
  const why = g && !g.pass ? g.message : d && !d.pass ? `direct: ${d.message}` : "";
  return [s, word(d), gateway ? word(g) : "-", oneLine(why)];
});

const header = ["scenario", "direct", "through gateway", "why it fails"];
fs.writeFileSync(tsvPath, [header, ...rows].map((r) => r.join("\t")).join("\n") + "\n");
const width = Math.max(header[0].length, ...rows.map((r) => r[0].length));
const pad = (s, n) => s + " ".repeat(Math.max(0, n - s.length));
console.log(`${pad(header[0], width)}  ${pad(header[1], 6)}  ${pad(header[2], 15)}  ${header[3]}`);
for (const r of rows) console.log(`${pad(r[0], width)}  ${pad(r[1], 6)}  ${pad(r[2], 15)}  ${r[3]}`);

const count = (m) => [...m.values()].filter((r) => r.pass).length;
console.log(`\ndirect: ${count(direct)}/${direct.size} scenarios pass`);
const regressions = gateway ? scenarios.filter((s) => direct.get(s)?.pass && !gateway.get(s)?.pass) : [];
if (gateway) {
  console.log(`through the gateway: ${count(gateway)}/${gateway.size} scenarios pass`);
  if (regressions.length) console.log(`pass directly but fail through the gateway (${regressions.length}): ${regressions.join(", ")}`);
}
if (count(direct) !== direct.size) process.exit(2);
process.exit(regressions.length ? 1 : 0);
