#!/usr/bin/env bash
# Makes the npm package: target/dist/agent-state-VERSION.tgz (`make dist-node`), holding the
# JavaScript, its types, README.md and LICENSE and the prebuilt addon for linux-x64-gnu, so that
# `npm install agent-state-VERSION.tgz` needs no Rust toolchain and no compiler. Prints the
# tarball's path on its last line.
#
# The addon is built (build.sh) and packed from a staging copy of the package, where it is
# stripped as `make dist` strips the C library (its dynamic symbols, which Node loads it by,
# stay; the static symbol table, there for perf and backtraces during development, goes).
# Works from any directory; `make dist` runs it after emptying target/dist.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
dist="$root/target/dist"
STRIP="${STRIP:-strip}"

version="$(node -p "require('$here/package.json').version")"
workspace="$(sed -n '/^\[workspace.package\]/,/^\[/s/^version = "\(.*\)"/\1/p' "$root/Cargo.toml" | head -n 1)"
if [ "$version" != "$workspace" ]; then
    echo "pack.sh: bindings/node/package.json says version $version, Cargo.toml's [workspace.package] $workspace" >&2
    exit 1
fi

bash "$here/build.sh" >&2

stage="$(mktemp -d "${TMPDIR:-/tmp}/agent-state-pack.XXXXXX")"
trap 'rm -rf "$stage"' EXIT
# What package.json's "files" names (README.md only when there is one), and package.json.
cp "$here/package.json" "$stage/"
node -e "for (const f of require('$here/package.json').files) console.log(f)" | while IFS= read -r entry; do
    entry="${entry%/}"
    if [ -e "$here/$entry" ]; then
        cp -r "$here/$entry" "$stage/$entry"
    elif [ "$entry" != README.md ]; then
        echo "pack.sh: package.json's files names $entry, which is missing" >&2
        exit 1
    fi
done
addon="$stage/agent_state.linux-x64-gnu.node"
"$STRIP" --strip-unneeded "$addon"
# The stripped addon still loads, and is the package's.
env -u AGENT_STATE_NODE_ADDON node -e "require('$stage')" >&2

mkdir -p "$dist"
rm -f "$dist/agent-state-$version.tgz"
(cd "$stage" && npm pack --ignore-scripts --pack-destination "$dist" --loglevel=error >/dev/null)
tarball="$dist/agent-state-$version.tgz"
[ -f "$tarball" ] || { echo "pack.sh: npm pack did not write $tarball" >&2; exit 1; }
listing="$(tar tzf "$tarball")"
grep -qx 'package/agent_state.linux-x64-gnu.node' <<<"$listing" ||
    { echo "pack.sh: $tarball lacks the addon" >&2; exit 1; }
echo "pack.sh: $(du -k "$tarball" | cut -f1) KiB, $(wc -l <<<"$listing") files" >&2
echo "$tarball"
