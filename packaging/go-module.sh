#!/usr/bin/env bash
# go-module.sh DIST VERSION: stages the Go module as it is published beside a release (make
# dist): DIST/go, and DIST/agent_state-go-VERSION.zip holding it under agent_state-go-VERSION/.
#
# The module is bindings/go's package (its non-test .go files, shim.c and shim.h, go.mod,
# README.md) with LICENSE, plus what its default build on linux/amd64 links
# (link_prebuilt.go): include/agent_state.h and lib/linux_amd64/libagent_state.a, the archive
# packaging/static-archive.sh made (DIST/lib/libagent_state.a: run after it). A program using
# it needs no Rust toolchain, no pkg-config and no libagent_state.so. Left out: the tests and
# testdata, and cmd/ and internal/ (the benchmark, which links SQLite's own library).
#
# `go mod vendor` copies only the directories of packages, so include/ and lib/linux_amd64/
# each get an empty Go package, imported by the package under a build tag no build sets
# (vendoring considers every tag): a vendor directory then holds the header and the archive too.
#
# The zip is reproducible: entries sorted by name, every timestamp SOURCE_DATE_EPOCH (default:
# the last commit's time), fixed permissions, no extra fields.
set -euo pipefail

if [[ $# -ne 2 ]]; then
    echo "usage: $0 DIST VERSION" >&2
    exit 2
fi
dist="$1" version="$2"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
src="$root/bindings/go"
out="$dist/go"
archive="$dist/lib/libagent_state.a"
[[ -f "$archive" ]] || { echo "$0: no $archive (make dist makes it first)" >&2; exit 1; }
SOURCE_DATE_EPOCH="${SOURCE_DATE_EPOCH:-$(git -C "$root" log -1 --format=%ct)}"
module="$(sed -n 's/^module //p' "$src/go.mod")"

rm -rf "$out"
mkdir -p "$out/include" "$out/lib/linux_amd64"
for f in "$src"/*.go "$src"/*.c "$src"/*.h "$src/go.mod" "$src/README.md"; do
    case "$f" in *_test.go) continue ;; esac
    cp "$f" "$out/"
done
cp "$root/LICENSE" "$out/"
cp "$root/include/agent_state.h" "$out/include/"
cp "$archive" "$out/lib/linux_amd64/"

cat >"$out/include/keep.go" <<GO
// Package include holds the C header of package agentstate; it is a Go package only so that
// \`go mod vendor\` copies this directory (it has no code).
package include
GO
cat >"$out/lib/linux_amd64/keep.go" <<GO
// Package linux_amd64 holds the static library package agentstate links on linux/amd64; it is
// a Go package only so that \`go mod vendor\` copies this directory (it has no code).
package linux_amd64
GO
cat >"$out/keep_vendor.go" <<GO
//go:build agentstate_keep_prebuilt

package agentstate

// Never built (no build sets the tag): these imports make \`go mod vendor\`, which considers
// every build tag, copy the directories of the header and of the prebuilt archive.
import (
	_ "$module/include"
	_ "$module/lib/linux_amd64"
)
GO
if command -v gofmt >/dev/null 2>&1; then
    unformatted="$(gofmt -l "$out")"
    [[ -z "$unformatted" ]] || { echo "$0: not gofmt-formatted: $unformatted" >&2; exit 1; }
fi

find "$out" -exec touch -h -d "@$SOURCE_DATE_EPOCH" {} +
zip="$dist/agent_state-go-$version.zip"
rm -f "$zip"
python3 - "$out" "$zip" "agent_state-go-$version" "$SOURCE_DATE_EPOCH" <<'PY'
import os, sys, time, zipfile
src, dest, top, epoch = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
stamp = time.gmtime(max(epoch, 315532800))[:6]  # zip's timestamps start in 1980
files = sorted(
    os.path.relpath(os.path.join(d, f), src) for d, _, fs in os.walk(src) for f in fs
)
with zipfile.ZipFile(dest, "w") as z:
    for rel in files:
        info = zipfile.ZipInfo(f"{top}/{rel}", date_time=stamp)
        info.create_system = 3  # Unix, so that the permissions below are read
        info.external_attr = 0o100644 << 16
        info.compress_type = zipfile.ZIP_DEFLATED
        with open(os.path.join(src, rel), "rb") as f:
            z.writestr(info, f.read(), compresslevel=9)
PY
echo "$0: $zip, $(stat -c %s "$zip") bytes" >&2
