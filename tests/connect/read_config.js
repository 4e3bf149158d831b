// Reads an MCP client's configuration file with the parser that client reads it with and prints
// it as plain JSON, for tests/connect.rs:
//   node read_config.js json FILE     JSON.parse (Claude Desktop, Claude Code)
//   node read_config.js jsonc FILE    jsonc-parser, as VS Code (and its forks Cursor, Windsurf) do
//   node read_config.js gemini FILE   JSON.parse after strip-json-comments, as Gemini CLI does
// The parsers come from .peers/parsers (tests/setup-peers.sh, pinned by tests/peers/parsers/).
'use strict';
const fs = require('fs');
const path = require('path');

const [mode, file] = process.argv.slice(2);
const parsers = path.join(__dirname, '..', '..', '.peers', 'parsers', 'node_modules');
const load = (name) => {
  try {
    return require(path.join(parsers, name));
  } catch (e) {
    console.error(`${name} is missing from ${parsers}: run tests/setup-peers.sh (${e.message})`);
    process.exit(3);
  }
};
const text = fs.readFileSync(file, 'utf8');
let value;
if (mode === 'json') {
  value = JSON.parse(text);
} else if (mode === 'jsonc') {
  const errors = [];
  value = load('jsonc-parser').parse(text, errors, { allowTrailingComma: true, disallowComments: false });
  if (errors.length) {
    console.error(`jsonc-parser: ${JSON.stringify(errors)}`);
    process.exit(1);
  }
} else if (mode === 'gemini') {
  value = JSON.parse(load('strip-json-comments')(text));
} else {
  console.error(`unknown mode ${mode}`);
  process.exit(2);
}
process.stdout.write(JSON.stringify(value));
