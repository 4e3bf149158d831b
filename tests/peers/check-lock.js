// Compares the lock npm wrote while installing the test peers with the committed one
// (tests/setup-peers.sh): every package the committed lock pins must be installed at its pinned
// version, and a package npm added on its own must be optional (a binary for another platform, which
// the registry may publish after the lock was written). Exit 1 with the differences otherwise.
"use strict";
const fs = require("fs");

const [pinnedPath, installedPath] = process.argv.slice(2);
if (!pinnedPath || !installedPath) {
  console.error("usage: node check-lock.js PINNED_LOCK INSTALLED_LOCK");
  process.exit(2);
}
const packagesOf = (path) => JSON.parse(fs.readFileSync(path, "utf8")).packages || {};
const pinned = packagesOf(pinnedPath);
const installed = packagesOf(installedPath);

const problems = [];
for (const [path, pin] of Object.entries(pinned)) {
  if (path === "") continue; // the root project itself
  const got = installed[path];
  if (!got) problems.push(`${path}: pinned at ${pin.version}, missing from the installed tree`);
  else if (got.version !== pin.version) problems.push(`${path}: pinned at ${pin.version}, installed ${got.version}`);
}
for (const [path, got] of Object.entries(installed)) {
  if (path !== "" && !pinned[path] && !got.optional) {
    problems.push(`${path}: ${got.version} installed but not pinned, and not optional`);
  }
}
if (problems.length) {
  for (const p of problems) console.error(`check-lock: ${p}`);
  process.exit(1);
}
