#!/bin/sh
# Creates the example nodes' identities with `lessgate keygen` and pins each
# new fingerprint in the other nodes' peer files. Run from anywhere:
#   sh peers/example/make-identities.sh
# Set LESSGATE to a built binary to skip `cargo run`.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
if [ -n "${LESSGATE:-}" ]; then
    run() { "$LESSGATE" "$@"; }
else
    run() { cargo run --quiet --manifest-path "$here/../../Cargo.toml" -- "$@"; }
fi
for node in alpha beta gamma; do
    fingerprint=$(run keygen --dir "$here/$node/identity" --name node --node-name "$node" --force)
    for owner in alpha beta gamma; do
        file="$here/$owner/peers/$node.toml"
        if [ -f "$file" ]; then
            sed "s|^fingerprint = .*|fingerprint = \"$fingerprint\"|" "$file" > "$file.new"
            mv "$file.new" "$file"
        fi
    done
    echo "$node: $fingerprint"
done
# The three nodes' files against each other: pins, addresses, uuids.
run check --config "$here/alpha/node.toml" --config "$here/beta/node.toml" --config "$here/gamma/node.toml"
