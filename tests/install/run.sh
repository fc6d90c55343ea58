#!/usr/bin/env bash
# make test-install: installs the library as a user would and uses it from outside the
# repository.
#
#   make install PREFIX=<temporary prefix>, then, in a directory outside the repository, with
#   nothing of the repository but what was installed (and, for Go, a copy of bindings/go standing
#   for the downloaded module; for Python, the sdist):
#   - layout: versioned .so with its SONAME and symlinks, no debug info, under 8 MB; headers
#     with the version macros; agent_state.pc; `make uninstall` removes every file; DESTDIR;
#   - C and C++ programs built with `pkg-config --cflags --libs agent_state`;
#   - the static archive: only agent_* symbols global; one program linked with it and the
#     system's SQLite (static and shared, both orders), each side on its own SQLite; the C suite
#     (tests/c) linked statically against it;
#   - a Go module that requires the binding by its module path, `go mod vendor`, pkg-config
#     (-tags agentstate_pkgconfig);
#   - make dist's artifacts, with no cargo or rustc on PATH: the C tarball (pkg-config through
#     its relocatable agent_state.pc, rpath to its lib/; its command), and the Go module zip
#     (the default build links its prebuilt archive: no pkg-config, no libagent_state.so; also
#     from a vendor directory); SHA256SUMS; both made again byte for byte;
#   - the install commands of the README and of the book's Getting started pages name the
#     artifacts as make dist made them (wheel.sh and node.sh check the wheel's and the npm
#     package's names the same way);
#   - Python: `python -m build` (sdist, and a wheel built from it: tag checked with auditwheel,
#     LICENSE inside), then a fresh venv with `pip install` of the sdist;
#   - the `agent-state` command, when the crate has it.
#
# Installs what it needs when missing (as root, Debian): pkg-config, libsqlite3-dev, Go (via
# bindings/go/goenv.sh), python3-venv; `build` and `auditwheel` from PyPI into
# target/install-test/tools-venv. The sdist builds compile the crate in
# target/install-test/cargo (CARGO_TARGET_DIR), kept between runs: the first run builds the
# dependencies there once (about a minute), later ones only the crate.
# Ends with "N passed, N failed"; exits non-zero when a check failed.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
here="$root/tests/install"
work="$root/target/install-test"
mkdir -p "$work"
tmp="$(mktemp -d "${TMPDIR:-/tmp}/agent-state-install.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
prefix="$tmp/prefix"
outside="$tmp/outside"
mkdir -p "$prefix" "$outside"

version="$(sed -n 's/^version = "\(.*\)"/\1/p' "$root/Cargo.toml" | head -n 1)"
major="${version%%.*}"

# shellcheck source=checks.sh
. "$here/checks.sh"

# ---------------------------------------------------------------------------------- tools
# Installs system packages as root only (a test script never runs sudo); as another user, stops
# and says what to install.
apt_install() {
    if [[ "$(id -u)" != 0 ]]; then
        echo "run.sh: missing $*; install them (as root: apt-get install -y $*) and run again" >&2
        exit 1
    fi
    say "installing $* (apt-get)"
    apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
}
multiarch="$(gcc -print-multiarch 2>/dev/null || echo x86_64-linux-gnu)"
missing=()
command -v pkg-config >/dev/null 2>&1 || missing+=(pkg-config)
{ [[ -f /usr/include/sqlite3.h ]] && [[ -f "/usr/lib/$multiarch/libsqlite3.a" ]]; } || missing+=(libsqlite3-dev)
python3 -c 'import ensurepip, venv' >/dev/null 2>&1 || missing+=(python3-venv)
if [[ ${#missing[@]} -gt 0 ]]; then apt_install "${missing[@]}"; fi
# shellcheck source=../../bindings/go/goenv.sh
. "$root/bindings/go/goenv.sh"

# ------------------------------------------------------------------------- make install
say "make install PREFIX=$prefix"
start=$SECONDS
if ! make -C "$root" --no-print-directory install PREFIX="$prefix" >"$tmp/log" 2>&1; then
    cat "$tmp/log"
    not_ok "make install"
    finish
fi
ok "make install ($((SECONDS - start)) s)"
lib="$prefix/lib"
export PKG_CONFIG_PATH="$lib/pkgconfig"

layout() {
    local want got
    # (bin/ holds the agent-state command, checked below)
    # (the C++ wrapper's parts: every bindings/cpp/agent_state/*.hpp, in include/agent_state/)
    # shellcheck disable=SC2046
    want="$(printf '%s\n' include include/agent_state.h include/agent_state.hpp \
        include/agent_state $(cd "$root/bindings/cpp" && printf 'include/%s\n' agent_state/*.hpp) lib \
        lib/libagent_state.a lib/libagent_state.so lib/libagent_state.so."$major" \
        lib/libagent_state.so."$version" lib/pkgconfig lib/pkgconfig/agent_state.pc | sort)"
    got="$(cd "$prefix" && find . -mindepth 1 ! -path './bin' ! -path './bin/*' | sed 's|^\./||' | sort)"
    diff <(echo "$want") <(echo "$got") || return 1
    [[ "$(readlink "$lib/libagent_state.so")" == "libagent_state.so.$major" ]] || return 1
    [[ "$(readlink "$lib/libagent_state.so.$major")" == "libagent_state.so.$version" ]] || return 1
    [[ -f "$lib/libagent_state.so.$version" && ! -L "$lib/libagent_state.so.$version" ]]
}
check "installed files and symlinks" layout

soname() {
    readelf -d "$lib/libagent_state.so.$version" | tee /dev/stderr | grep "Library soname: \[libagent_state.so.$major\]" >/dev/null
}
check "SONAME libagent_state.so.$major" soname

no_debug_info() {
    local f size
    for f in "$lib/libagent_state.so.$version" "$lib/libagent_state.a"; do
        if readelf -SW "$f" | grep -E '\.(debug_|zdebug)'; then
            echo "$f has debug sections"
            return 1
        fi
    done
    size="$(stat -c %s "$lib/libagent_state.so.$version")"
    echo "libagent_state.so.$version: $size bytes; libagent_state.a: $(stat -c %s "$lib/libagent_state.a") bytes"
    # 8 MB: about 3 MB of library and SQLite, and since TLS to PostgreSQL about 2.5 MB of rustls,
    # ring and webpki (5.6 MB measured); with debug information it would be over 20 MB.
    [[ $size -lt $((8 * 1024 * 1024)) ]]
}
check "no debug info, the .so under 8 MB" no_debug_info

version_macros() {
    local h="$prefix/include/agent_state.h" maj min pat
    IFS=. read -r maj min pat <<<"$version"
    grep -qx "#define AGENT_STATE_VERSION_MAJOR $maj" "$h" &&
        grep -qx "#define AGENT_STATE_VERSION_MINOR $min" "$h" &&
        grep -qx "#define AGENT_STATE_VERSION_PATCH $pat" "$h" &&
        grep -qx "#define AGENT_STATE_VERSION \"$version\"" "$h" &&
        [[ "$(pkg-config --modversion agent_state)" == "$version" ]]
}
check "header version macros and pkg-config --modversion are $version" version_macros

# ---------------------------------------------------------------------------------------- C
cp "$here/app.c" "$here/app.cpp" "$here/coexist.c" "$outside/"
cd "$outside"

build_c() {
    # shellcheck disable=SC2046
    cc -std=c99 -Wall -Wextra -Werror app.c $(pkg-config --cflags --libs agent_state) \
        -Wl,-rpath,"$lib" -o app_c &&
        ldd ./app_c | tee /dev/stderr | grep "libagent_state.so.$major => $lib/libagent_state.so.$major" >/dev/null
}
check "C: cc app.c \$(pkg-config --cflags --libs agent_state)" build_c
expect_output "C: the program runs against the prefix" \
    "agent_state $version: {\"runs\":0,\"from\":\"c\"}" ./app_c "$outside/c.db"

build_cpp() {
    # shellcheck disable=SC2046
    c++ -std=c++17 -Wall -Wextra -Werror app.cpp $(pkg-config --cflags --libs agent_state) \
        -Wl,-rpath,"$lib" -o app_cpp
}
check "C++: agent_state.hpp with pkg-config" build_cpp
expect_output "C++: the program runs" '{"runs":0,"from":"c++"}' ./app_cpp "$outside/cpp.db"

# ------------------------------------------------------------------------- static archive
static_symbols() {
    local exported archive
    exported="$(readelf --dyn-syms -W "$lib/libagent_state.so.$version" |
        awk '$7 != "UND" && ($5 == "GLOBAL" || $5 == "WEAK") && $8 != "" { sub(/@.*/, "", $8); print $8 }' | sort -u)"
    archive="$(readelf -sW "$lib/libagent_state.a" |
        awk '$7 != "UND" && ($5 == "GLOBAL" || $5 == "WEAK") && $8 != "" { print $8 }' | sort -u)"
    echo "$(wc -l <<<"$archive") global symbols in libagent_state.a"
    [[ -n "$archive" ]] && ! grep -v '^agent_' <<<"$archive" && [[ "$archive" == "$exported" ]]
}
check "libagent_state.a: its global symbols are the .so's agent_* exports, nothing else" static_symbols

bundled="$(cd "$root" && cargo metadata --format-version 1 2>/dev/null | python3 -c '
import json, os, re, sys
meta = json.load(sys.stdin)
sys_dir = [os.path.dirname(p["manifest_path"]) for p in meta["packages"] if p["name"] == "libsqlite3-sys"][0]
header = open(os.path.join(sys_dir, "sqlite3", "sqlite3.h")).read()
print(re.search(r"#define SQLITE_VERSION_NUMBER (\d+)", header).group(1))')"
system_a="/usr/lib/$multiarch/libsqlite3.a"
coexist_run() {
    local rc=0
    "./coexist-$1" "$outside/$1" || rc=$?
    if [[ $rc == 77 ]]; then echo "(skipped: same SQLite version on both sides)"; return 0; fi
    return $rc
}
for order in "static-sqlite-after" "static-sqlite-before" "shared-sqlite-after" "shared-sqlite-before"; do
    case "$order" in
        static-sqlite-after) libs=("$lib/libagent_state.a" "$system_a") ;;
        static-sqlite-before) libs=("$system_a" "$lib/libagent_state.a") ;;
        shared-sqlite-after) libs=("$lib/libagent_state.a" -lsqlite3) ;;
        shared-sqlite-before) libs=(-lsqlite3 "$lib/libagent_state.a") ;;
    esac
    mkdir -p "$outside/$order"
    check "static archive + system SQLite ($order): links" \
        cc -std=c99 -Wall -Wextra -Werror -DBUNDLED_SQLITE_VERSION_NUMBER="$bundled" \
        -I"$prefix/include" coexist.c "${libs[@]}" -lpthread -ldl -lm -o "coexist-$order"
    check "static archive + system SQLite ($order): each side on its own SQLite" coexist_run "$order"
    cat "$tmp/log"
done

c_suite_static() {
    # (the one part of the repository used here: the C suite, tests/c/*.c, as a thorough user
    # of the archive)
    cc -std=c99 -O1 -I"$prefix/include" "$root"/tests/c/*.c "$lib/libagent_state.a" \
        "$system_a" -lpthread -ldl -lm -o test_c_static &&
        ! ldd ./test_c_static | grep libagent_state &&
        (cd "$outside" && AGENT_TEST_QUICK=1 ./test_c_static) | tail -1 | grep -Eq '^[0-9]+ passed, 0 failed$'
}
check "static archive: the C suite (tests/c, quick) passes linked against it" c_suite_static

# --------------------------------------------------------------------------------------- Go
# A module outside the repository, requiring the binding by its module path. Nothing can be
# fetched here, so a replace directive points at a copy of bindings/go (what `go get` would
# download); after `go mod vendor` the copy is deleted, and the build uses the vendor directory
# and the installed library only, through pkg-config (-tags agentstate_pkgconfig: the default
# is the prebuilt archive of the module make dist stages, tested below).
gomod="$tmp/gomodule/bindings-go"
mkdir -p "$gomod" "$outside/goapp"
cp -r "$root/bindings/go/." "$gomod/"
cp "$here/go/main.go" "$outside/goapp/"
cat >"$outside/goapp/go.mod" <<EOF
module example.com/goapp

go 1.19

require github.com/agent-state/agent-state/bindings/go v$version

replace github.com/agent-state/agent-state/bindings/go => $gomod
EOF
go_build() (
    cd "$outside/goapp" &&
        GOFLAGS=-mod=mod go mod vendor &&
        [[ -f vendor/github.com/agent-state/agent-state/bindings/go/shim.c ]] &&
        rm -rf "$tmp/gomodule" &&
        GOFLAGS="-mod=vendor -tags=agentstate_pkgconfig" CGO_LDFLAGS="-Wl,-rpath,$lib" go build -o app_go . &&
        ldd ./app_go | tee /dev/stderr | grep "libagent_state.so.$major => $lib/libagent_state.so.$major" >/dev/null
)
check "Go: a module outside the repository, go mod vendor, -tags agentstate_pkgconfig" go_build
expect_output "Go: the program runs against the prefix" \
    "agent_state $version: {\"runs\":0,\"from\":\"go\"}" "$outside/goapp/app_go" "$outside/go.db"

# ------------------------------------------------------------------------------- make dist
# The release's artifacts as a stranger gets them (make dist; the npm package is node.sh's):
# the C tarball and the Go module zip, each unpacked outside the repository and used with no
# Rust toolchain on PATH, no LD_LIBRARY_PATH and nothing installed.
say "make dist DIST_NODE="
start=$SECONDS
if make -C "$root" --no-print-directory dist DIST_NODE= >"$tmp/log" 2>&1; then
    ok "make dist ($((SECONDS - start)) s)"
else
    sed 's/^/     | /' "$tmp/log" | tail -40
    not_ok "make dist ($((SECONDS - start)) s)"
fi
dist_dir="$root/target/dist"
tarball="$dist_dir/agent_state-$version-linux-x86_64.tar.gz"
gozip="$dist_dir/agent_state-go-$version.zip"
for f in "$tarball" "$gozip" "$dist_dir/go/lib/linux_amd64/libagent_state.a"; do
    if [[ -f "$f" ]]; then echo "$(basename "$f"): $(stat -c %s "$f") bytes"; fi
done

sums() {
    (cd "$dist_dir" && cat SHA256SUMS && sha256sum -c SHA256SUMS) &&
        grep -q " agent_state-go-$version.zip\$" "$dist_dir/SHA256SUMS" &&
        grep -q " agent_state-$version-linux-x86_64.tar.gz\$" "$dist_dir/SHA256SUMS"
}
check "make dist: SHA256SUMS lists the tarball and the zip, and they match" sums
docs_name tarball 'agent_state-[0-9][0-9.]*-linux-x86_64\.tar\.gz' "$tarball"
docs_name gozip 'agent_state-go-[0-9][0-9.]*\.zip' "$gozip"
# Made again (with the same SOURCE_DATE_EPOCH: the last commit's, pinned here in case another
# commit lands meanwhile), the tarball and the zip are the same bytes.
# (The packaging scripts of dist-go and dist-tarball, run twice on what make dist built.)
reproducible() {
    local epoch i
    epoch="$(git -C "$root" log -1 --format=%ct)"
    for i in 1 2; do
        SOURCE_DATE_EPOCH="$epoch" bash "$root/packaging/go-module.sh" "$dist_dir" "$version" &&
            SOURCE_DATE_EPOCH="$epoch" bash "$root/packaging/c-tarball.sh" "$dist_dir" "$version" &&
            sha256sum "$tarball" "$gozip" >"$tmp/made-$i" &&
            sleep 1 || return 1
    done
    cat "$tmp/made-1" && diff "$tmp/made-1" "$tmp/made-2"
}
check "make dist: the tarball and the zip are reproducible (same bytes when made again)" reproducible
# The check above made them anew: SHA256SUMS follows.
make -C "$root" --no-print-directory dist-sums >/dev/null 2>&1 || not_ok "make dist-sums"

# A PATH without cargo and rustc (their directories dropped), with Go's own bin/ first.
bare_path="$(dirname "$(readlink -f "$(command -v go)")")"
IFS=: read -ra path_dirs <<<"$PATH"
for d in "${path_dirs[@]}"; do
    if [[ -n "$d" && ! -e "$d/cargo" && ! -e "$d/rustc" ]]; then bare_path="$bare_path:$d"; fi
done
no_rust_env=(env -u LD_LIBRARY_PATH -u PKG_CONFIG_PATH -u CARGO_TARGET_DIR PATH="$bare_path")
no_rust() { "${no_rust_env[@]}" "$@"; }
check "make dist: the PATH for the checks below has no cargo and no rustc" \
    no_rust bash -c '! command -v cargo && ! command -v rustc && command -v go && command -v cc'

# --- the C tarball: agent_state-VERSION-linux-x86_64.tar.gz
ctree="$tmp/unpacked/agent_state-$version-linux-x86_64"
mkdir -p "$tmp/unpacked"
check "C tarball: unpacks" tar -C "$tmp/unpacked" -xzf "$tarball"
tarball_layout() {
    local want got
    # shellcheck disable=SC2046
    want="$(printf '%s\n' LICENSE bin bin/agent-state include include/agent_state.h include/agent_state.hpp \
        include/agent_state $(cd "$root/bindings/cpp" && printf 'include/%s\n' agent_state/*.hpp) lib \
        lib/libagent_state.a lib/libagent_state.so lib/libagent_state.so."$major" \
        lib/libagent_state.so."$version" lib/pkgconfig lib/pkgconfig/agent_state.pc | sort)"
    got="$(cd "$ctree" && find . -mindepth 1 | sed 's|^\./||' | sort)"
    diff <(echo "$want") <(echo "$got") || return 1
    [[ "$(readlink "$ctree/lib/libagent_state.so")" == "libagent_state.so.$major" ]] &&
        [[ "$(readlink "$ctree/lib/libagent_state.so.$major")" == "libagent_state.so.$version" ]] &&
        cat "$ctree/lib/pkgconfig/agent_state.pc" &&
        # shellcheck disable=SC2016
        grep -qx 'prefix=${pcfiledir}/../..' "$ctree/lib/pkgconfig/agent_state.pc"
}
check "C tarball: make install's layout, the command, LICENSE, a relocatable agent_state.pc" tarball_layout
mkdir -p "$outside/tarball"
cp "$here/app.c" "$outside/tarball/"
# Linked with the shared library, found at run time through an rpath to the unpacked lib/ (no
# LD_LIBRARY_PATH).
tarball_c() (
    cd "$outside/tarball" &&
        flags="$(PKG_CONFIG_PATH="$ctree/lib/pkgconfig" pkg-config --cflags --libs agent_state)" &&
        echo "pkg-config --cflags --libs agent_state: $flags" &&
        [[ "$(PKG_CONFIG_PATH="$ctree/lib/pkgconfig" pkg-config --modversion agent_state)" == "$version" ]] &&
        # shellcheck disable=SC2086
        no_rust cc -std=c99 -Wall -Wextra -Werror app.c $flags -Wl,-rpath,"$ctree/lib" -o app_c &&
        no_rust ldd ./app_c | tee /dev/stderr |
        grep -E "libagent_state.so.$major => $ctree/lib/(\\./)?libagent_state.so.$major" >/dev/null
)
check "C tarball: cc app.c \$(pkg-config ...) with PKG_CONFIG_PATH=<unpacked>/lib/pkgconfig, rpath to <unpacked>/lib" tarball_c
expect_output "C tarball: the program runs against the unpacked library" \
    "agent_state $version: {\"runs\":0,\"from\":\"c\"}" "${no_rust_env[@]}" "$outside/tarball/app_c" "$outside/tarball/c.db"
expect_output "C tarball: bin/agent-state --version" "agent-state $version" "${no_rust_env[@]}" "$ctree/bin/agent-state" --version
expect_output "C tarball: bin/agent-state writes a store" '{"n":1}' \
    "${no_rust_env[@]}" "$ctree/bin/agent-state" set "$outside/tarball/cli.db" '{"n":1}'

# --- the Go module: agent_state-go-VERSION.zip (target/dist/go), its prebuilt archive inside
# A module outside the repository requiring the binding at v0.0.0, replaced by the unpacked zip
# (as a user does after downloading it beside the release): no tag, no pkg-config (PKG_CONFIG
# names a command that fails, so any use of it would), nothing installed.
gomodule="github.com/agent-state/agent-state/bindings/go"
gounzip="$tmp/gozip"
gotree="$gounzip/agent_state-go-$version"
check "Go module zip: unpacks, the same files as target/dist/go" \
    bash -c 'unzip -q "$1" -d "$2" && diff -r "$3" "$2/agent_state-go-$4"' _ "$gozip" "$gounzip" "$dist_dir/go" "$version"
go_prebuilt_app() {
    local dir="$1" target="$2"
    mkdir -p "$dir"
    cp "$here/go/main.go" "$dir/"
    cat >"$dir/go.mod" <<EOF
module example.com/goprebuilt

go 1.19

require $gomodule v0.0.0

replace $gomodule => $target
EOF
}
go_prebuilt_app "$outside/goprebuilt" "$gotree"
go_prebuilt() (
    cd "$outside/goprebuilt" &&
        no_rust env GOFLAGS=-mod=mod GOPROXY=off GOWORK=off PKG_CONFIG=false go build -o app_go . &&
        ldd ./app_go | tee /dev/stderr &&
        ! ldd ./app_go | grep libagent_state
)
check "Go module zip: go build, GOFLAGS=-mod=mod, no tag, no pkg-config; ldd shows no libagent_state" go_prebuilt
expect_output "Go module zip: the program runs" \
    "agent_state $version: {\"runs\":0,\"from\":\"go\"}" "${no_rust_env[@]}" "$outside/goprebuilt/app_go" "$outside/goprebuilt/go.db"
# go mod vendor copies only packages' directories: the module's include/ and lib/linux_amd64/
# are (empty) packages so that a vendor directory holds the header and the archive too.
go_prebuilt_vendor() (
    cp -r "$gotree" "$tmp/gozip-vendor" &&
        go_prebuilt_app "$outside/goprebuilt-vendor" "$tmp/gozip-vendor" &&
        cd "$outside/goprebuilt-vendor" &&
        no_rust env GOFLAGS=-mod=mod GOPROXY=off GOWORK=off go mod vendor &&
        v="vendor/$gomodule" &&
        ls -l "$v/lib/linux_amd64" "$v/include" &&
        cmp "$v/lib/linux_amd64/libagent_state.a" "$gotree/lib/linux_amd64/libagent_state.a" &&
        rm -rf "$tmp/gozip-vendor" &&
        no_rust env GOFLAGS=-mod=vendor GOPROXY=off GOWORK=off PKG_CONFIG=false go build -o app_go . &&
        ! ldd ./app_go | grep libagent_state &&
        no_rust ./app_go "$outside/goprebuilt-vendor/go.db"
)
check "Go module zip: go mod vendor keeps the header and the archive; builds from vendor/ and runs" go_prebuilt_vendor
# Inside the repository the package has no archive beside it: without a tag, the build stops
# with a message saying which tag to use.
go_inrepo_default() {
    local rc=0
    (cd "$root/bindings/go" && GOFLAGS=-mod=readonly go build . >"$tmp/inrepo" 2>&1) || rc=$?
    cat "$tmp/inrepo"
    [[ $rc -ne 0 ]] && grep -q 'agentstate: no prebuilt lib/linux_amd64/libagent_state.a' "$tmp/inrepo"
}
check "Go: in the repository, a build without a tag stops and names the tags" go_inrepo_default

# ----------------------------------------------------------------------------------- Python
tools="$work/tools-venv"
export PIP_DISABLE_PIP_VERSION_CHECK=1
if ! "$tools/bin/python" -c 'import build, auditwheel' >/dev/null 2>&1; then
    rm -rf "$tools"
    python3 -m venv "$tools"
    "$tools/bin/python" -m pip install --quiet build auditwheel
fi
# The sdist unpacks somewhere new for every build, so cargo compiles the crate anew each time
# (the dependencies stay built): drop the previous runs' copies of it.
export CARGO_TARGET_DIR="$work/cargo"
rm -rf "$CARGO_TARGET_DIR"/release/.fingerprint/*agent_state* "$CARGO_TARGET_DIR"/release/build/*agent_state* \
    "$CARGO_TARGET_DIR"/release/deps/*agent_state*
dist="$tmp/dist"
check "Python: python -m build (an sdist, and a wheel built from it)" \
    "$tools/bin/python" -m build --outdir "$dist" "$root/bindings/python"
sdist="$dist/agent_state-$version.tar.gz"

sdist_contents() {
    local listing
    listing="$(tar tzf "$sdist")"
    for f in LICENSE pyproject.toml setup.py src/agent_state/__init__.py rust/Cargo.toml \
        rust/Cargo.lock rust/.cargo/config.toml rust/crates/agent_state/src/lib.rs rust/crates/agent_state_ffi/src/lib.rs \
        rust/crates/libagent_state/build.rs rust/crates/libagent_state/Cargo.toml; do
        grep -qx "agent_state-$version/$f" <<<"$listing" || { echo "missing: $f"; return 1; }
    done
    ! grep -E '/(target|\.libs)/' <<<"$listing"
}
check "Python: the sdist carries the package, LICENSE and the Rust crate" sdist_contents

wheel_checks() {
    local wheel tag
    wheel="$(ls "$dist"/*.whl)"
    echo "$wheel"
    "$tools/bin/auditwheel" show "$wheel" | tee "$tmp/auditwheel"
    tag="$(tr '\n' ' ' <"$tmp/auditwheel" | sed -n 's/.*consistent with the following platform tag: *"\([^"]*\)".*/\1/p')"
    [[ -n "$tag" && "$(basename "$wheel")" == "agent_state-$version-py3-none-$tag.whl" ]] ||
        { echo "the wheel's tag is not auditwheel's '$tag'"; return 1; }
    unzip -Z1 "$wheel" | tee "$tmp/wheel-files"
    grep -qx "agent_state-$version.dist-info/licenses/LICENSE" "$tmp/wheel-files" &&
        grep -qx "agent_state/.libs/libagent_state.so" "$tmp/wheel-files" &&
        ! grep -E '\.so$' "$tmp/wheel-files" | grep -v '^agent_state/\.libs/' &&
        cmp "$root/LICENSE" "$root/bindings/python/LICENSE" &&
        unzip -p "$wheel" "agent_state-$version.dist-info/licenses/LICENSE" | cmp - "$root/LICENSE"
}
check "Python: wheel tagged as auditwheel says, LICENSE inside, library under agent_state/.libs" wheel_checks

venv="$outside/venv"
check "Python: fresh venv, pip install of the sdist (builds the library with cargo)" \
    bash -c 'python3 -m venv "$1" && cd "$2" && "$1/bin/python" -m pip install --quiet "$3"' _ "$venv" "$outside" "$sdist"
cp "$here/app.py" "$outside/"
expect_output "Python: the installed package works, with its bundled library" \
    "agent_state $version: {'runs': 0, 'from': 'python'}" "$venv/bin/python" "$outside/app.py" "$outside/py.db"
expect_output "Python: AGENT_STATE_LIBRARY=\$PREFIX/lib/libagent_state.so.$major uses the installed library" \
    "agent_state $version: {'runs': 0, 'from': 'python'}" \
    env AGENT_STATE_LIBRARY="$lib/libagent_state.so.$major" "$venv/bin/python" "$outside/app.py" "$outside/py2.db" \
    "$lib/libagent_state.so.$major"

# ------------------------------------------------------------------------ agent-state command
# The installed command, run from outside the repository on a store of its own: a write goes
# through the library (versions count), a read prints compact JSON off a terminal, a library
# error exits with 64 + its status and names it on stderr.
cli="$prefix/bin/agent-state"
check "agent-state: installed in \$PREFIX/bin" test -x "$cli"
expect_output "agent-state: set through the installed command" '{"n":1,"from":"cli"}' \
    "$cli" set "$outside/cli.db" '{"n":1,"from":"cli"}'
expect_output "agent-state: get prints the stored state" '{"n":1,"from":"cli"}' "$cli" get "$outside/cli.db"
expect_output "agent-state: version of the store" '1' "$cli" version "$outside/cli.db"
cli_error() {
    local rc=0
    "$cli" set "$outside/cli.db" '[1]' 2>"$tmp/cli-err" && rc=0 || rc=$?
    [[ $rc -eq 65 ]] && grep -q INVALID_ARGUMENT "$tmp/cli-err"
}
check "agent-state: a bad patch exits 65 (64 + INVALID_ARGUMENT) and names the status" cli_error

# ------------------------------------------------------------------------ DESTDIR, uninstall
# The sdist builds' target directory is theirs: make install uses the checkout's release build.
unset CARGO_TARGET_DIR
cd "$root"
destdir() {
    local stage="$tmp/stage"
    make --no-print-directory install DESTDIR="$stage" PREFIX=/usr/local &&
        [[ -f "$stage/usr/local/lib/libagent_state.so.$version" ]] &&
        grep -qx "prefix=/usr/local" "$stage/usr/local/lib/pkgconfig/agent_state.pc" &&
        make --no-print-directory uninstall DESTDIR="$stage" PREFIX=/usr/local &&
        [[ -z "$(find "$stage" ! -type d)" ]]
}
check "make install/uninstall DESTDIR=... PREFIX=/usr/local stage under DESTDIR" destdir
uninstall() {
    make --no-print-directory uninstall PREFIX="$prefix" && [[ -z "$(find "$prefix" ! -type d)" ]]
}
check "make uninstall removes every installed file" uninstall

finish
