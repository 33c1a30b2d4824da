#!/usr/bin/env bash
# Re-fetch the JavaScript the web pages bundle (service/web/static/vendor/) from the npm registry and
# check it against the pinned digest. The files are committed, so medkg installs and runs offline;
# run this (`make vendor-js`) only to verify them or, with new pins, to upgrade.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
CYTOSCAPE_VERSION=3.35.0
CYTOSCAPE_SHA256=71fa9ebec21a7ca2c40cff6aacc30d1f6464e363662ad4b2c197e1adc770cd94  # dist/cytoscape.min.js
out=service/web/static/vendor
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
curl -fsSL "https://registry.npmjs.org/cytoscape/-/cytoscape-${CYTOSCAPE_VERSION}.tgz" -o "$tmp/cytoscape.tgz"
tar -xzf "$tmp/cytoscape.tgz" -C "$tmp" package/dist/cytoscape.min.js package/LICENSE
echo "${CYTOSCAPE_SHA256}  $tmp/package/dist/cytoscape.min.js" | sha256sum -c --quiet
cp "$tmp/package/dist/cytoscape.min.js" "$out/cytoscape.min.js"
cp "$tmp/package/LICENSE" "$out/cytoscape.LICENSE"
echo "vendor-js: cytoscape ${CYTOSCAPE_VERSION} verified in $out"
