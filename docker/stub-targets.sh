#!/bin/sh
# Writes `fn main() {}` at every target path Cargo.toml declares (the `path = "..."` lines of its
# [[bin]], [[test]] and [[example]] tables), so that cargo can build the dependencies before the
# sources are copied in: the dependency-caching layer of docker/Dockerfile. Run it in the crate root,
# with only Cargo.toml and Cargo.lock there. docker/lint.sh runs it too, to check that layer resolves.
set -eu
[ -f Cargo.toml ] || { echo "stub-targets.sh: no Cargo.toml in $(pwd)" >&2; exit 1; }
sed -n 's/^path[[:space:]]*=[[:space:]]*"\([^"]*\)"[[:space:]]*$/\1/p' Cargo.toml |
    while IFS= read -r target; do
        mkdir -p "$(dirname "$target")"
        [ -e "$target" ] || echo 'fn main() {}' >"$target"
    done
