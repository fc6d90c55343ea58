# Helpers shared by the server scripts of the tests (server.sh, tls.sh, bouncer.sh): source it.

# The directory of PostgreSQL's server programs (Debian: /usr/lib/postgresql/VERSION/bin).
find_bin() {
    local dir
    for dir in /usr/lib/postgresql/*/bin; do
        if [[ -x $dir/pg_ctl ]]; then
            echo "$dir"
            return 0
        fi
    done
    return 1
}

# Runs a server command as the postgres user when root (PostgreSQL and pgbouncer refuse root).
as_owner() {
    if [[ $(id -u) -eq 0 ]]; then
        runuser -u postgres -- "$@"
    else
        "$@"
    fi
}

# A TCP port on 127.0.0.1 that nothing listens on now (the kernel's choice).
free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
