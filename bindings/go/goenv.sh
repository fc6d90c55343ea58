# Sourced by bindings/go/run-tests.sh, bench/run.sh and tests/install/run.sh: makes sure Go is
# installed (from the system packages, on a fresh machine), keeps every Go cache under target/go
# and builds the package against the checkout (tag agentstate_inrepo). Expects $root to be the
# repository's root.
#
# Go missing: as root, installs the system's golang-go with apt-get (after apt-get update when
# the package lists do not know it yet); as any other user, stops with a message saying what to
# install. It never runs sudo: a test script must not ask for privileges.
if ! command -v go >/dev/null 2>&1; then
    if [ "$(id -u)" != 0 ]; then
        echo "goenv.sh: go not found; install Go 1.19+ (e.g. as root: apt-get install -y golang-go) and put it on PATH" >&2
        return 1 2>/dev/null || exit 1
    fi
    if ! command -v apt-get >/dev/null 2>&1; then
        echo "goenv.sh: go not found and there is no apt-get to install it with; install Go 1.19+ and put it on PATH" >&2
        return 1 2>/dev/null || exit 1
    fi
    echo "goenv.sh: go not found; installing golang-go (apt-get, as root)" >&2
    if ! apt-cache show golang-go >/dev/null 2>&1; then
        apt-get update
    fi
    DEBIAN_FRONTEND=noninteractive apt-get install -y golang-go
fi
export CGO_ENABLED=1
export GOPATH="$root/target/go/path"
export GOCACHE="$root/target/go/cache"
export GOMODCACHE="$root/target/go/path/pkg/mod"
# agentstate_inrepo: link the checkout's own build (include/, target/release) rather than an
# installed library found with pkg-config, the package's default. A -tags on the command line
# (run-tests.sh's agentstate_static) replaces it.
export GOFLAGS="-mod=readonly -tags=agentstate_inrepo"
export GOPROXY=off
export GOTOOLCHAIN=local
export GO111MODULE=on
export GOWORK=off
mkdir -p "$GOPATH" "$GOCACHE"
