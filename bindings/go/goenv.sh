# Sourced by bindings/go/run-tests.sh and bench/run.sh: makes sure Go is installed (from the
# system packages, on a fresh machine), keeps every Go cache under target/go and builds the
# package against the checkout (tag agentstate_inrepo). Expects $root to be the repository's
# root.
if ! command -v go >/dev/null 2>&1; then
    echo "goenv.sh: go not found; installing golang-go" >&2
    sudo=""
    if [ "$(id -u)" != 0 ]; then sudo="sudo"; fi
    $sudo apt-get update
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y golang-go
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
