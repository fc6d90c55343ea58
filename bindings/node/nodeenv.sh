# Sourced by the scripts that run Node (bindings/node/run-tests.sh, tests/readme/run.sh,
# crates/agent-state-serve/client/run-tests.sh, tests/install/node.sh), as goenv.sh is for Go:
#
#   node_need [npm]   Node >= 20 (and npm, when asked) on PATH: installed from Debian's packages
#                     when missing and running as root, else a message and exit 1;
#   node_tools        the package's test tools (package-lock.json's devDependencies: typescript,
#                     @types/node) in bindings/node/node_modules: `npm ci` when one is missing
#                     there or is of another version than the lock file's (a changed lock), so an
#                     unchanged install costs nothing.
# Messages go to standard error, prefixed with the sourcing script's name.

node_package_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

node_need() {
    local who packages=(nodejs)
    who="$(basename "$0")"
    [[ "${1:-}" == npm ]] && packages+=(npm)
    if ! command -v node >/dev/null 2>&1 || { [[ "${1:-}" == npm ]] && ! command -v npm >/dev/null 2>&1; }; then
        if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
            echo "$who: installing ${packages[*]} (Debian)" >&2
            apt-get update -qq >/dev/null
            DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${packages[@]}" >/dev/null
        else
            echo "$who: ${packages[*]} missing; install Node.js >= 20 (Debian: ${packages[*]})" >&2
            exit 1
        fi
    fi
    local major
    major="$(node -p 'process.versions.node.split(".")[0]')"
    if [ "$major" -lt 20 ]; then
        echo "$who: Node $(node --version) is too old: the package needs Node >= 20" >&2
        exit 1
    fi
}

node_tools_current() {
    (cd "$node_package_dir" && node -e '
const fs = require("fs");
const lock = JSON.parse(fs.readFileSync("package-lock.json", "utf8"));
for (const [where, entry] of Object.entries(lock.packages)) {
  if (where === "") continue;
  let installed;
  try { installed = JSON.parse(fs.readFileSync(`${where}/package.json`, "utf8")).version; } catch { process.exit(1); }
  if (installed !== entry.version) process.exit(1);
}')
}

node_tools() {
    if ! node_tools_current; then
        echo "+ npm ci (bindings/node)" >&2
        (cd "$node_package_dir" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error) >&2
    fi
}
