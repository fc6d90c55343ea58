#!/usr/bin/env bash
# c-tarball.sh DIST VERSION: the C library as a tarball for linux x86_64 (make dist), for users
# without a Rust toolchain: DIST/agent_state-VERSION-linux-x86_64.tar.gz, holding under
# agent_state-VERSION-linux-x86_64/ what `make install` installs under its prefix:
#
#   lib/libagent_state.so.VERSION, its SONAME link libagent_state.so.MAJOR and the link
#       libagent_state.so; lib/libagent_state.a (packaging/static-archive.sh's)
#   lib/pkgconfig/agent_state.pc, relocatable: prefix=${pcfiledir}/../.., so the tree works
#       wherever it is unpacked (PKG_CONFIG_PATH=DIR/lib/pkgconfig)
#   include/agent_state.h, include/agent_state.hpp and its parts in include/agent_state/
#   bin/agent-state, the command; LICENSE
#
# Takes the stripped library, the archive and the command from DIST/lib and DIST/bin (run
# after make dist made them). Reproducible: entries sorted by name, every timestamp
# SOURCE_DATE_EPOCH (default: the last commit's time), owner and group 0, gzip without a name
# or time.
set -euo pipefail

if [[ $# -ne 2 ]]; then
    echo "usage: $0 DIST VERSION" >&2
    exit 2
fi
dist="$1" version="$2"
major="${version%%.*}"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SOURCE_DATE_EPOCH="${SOURCE_DATE_EPOCH:-$(git -C "$root" log -1 --format=%ct)}"
name="agent_state-$version-linux-x86_64"
for f in "$dist/lib/libagent_state.so.$version" "$dist/lib/libagent_state.a" "$dist/bin/agent-state"; do
    [[ -f "$f" ]] || { echo "$0: no $f (make dist makes it first)" >&2; exit 1; }
done

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
top="$tmp/$name"
install -d "$top/lib/pkgconfig" "$top/include/agent_state" "$top/bin"
install -m 755 "$dist/lib/libagent_state.so.$version" "$top/lib/"
ln -s "libagent_state.so.$version" "$top/lib/libagent_state.so.$major"
ln -s "libagent_state.so.$major" "$top/lib/libagent_state.so"
install -m 644 "$dist/lib/libagent_state.a" "$top/lib/"
install -m 644 "$root/include/agent_state.h" "$root/bindings/cpp/agent_state.hpp" "$top/include/"
install -m 644 "$root"/bindings/cpp/agent_state/*.hpp "$top/include/agent_state/"
# ${pcfiledir} is the directory the .pc file was found in (pkg-config and pkgconf both set it).
# shellcheck disable=SC2016
sed -e 's|@prefix@|${pcfiledir}/../..|' -e 's|@libdir@|${prefix}/lib|' \
    -e 's|@includedir@|${prefix}/include|' -e "s|@version@|$version|" \
    "$root/packaging/agent_state.pc.in" >"$top/lib/pkgconfig/agent_state.pc"
chmod 644 "$top/lib/pkgconfig/agent_state.pc"
install -m 755 "$dist/bin/agent-state" "$top/bin/"
install -m 644 "$root/LICENSE" "$top/"

out="$dist/$name.tar.gz"
rm -f "$out"
tar -C "$tmp" --sort=name --mtime="@$SOURCE_DATE_EPOCH" --owner=0 --group=0 --numeric-owner --mode=u+rwX,go+rX,go-w \
    --format=gnu -cf - "$name" | gzip -n -9 >"$out"
echo "$0: $out, $(stat -c %s "$out") bytes" >&2
