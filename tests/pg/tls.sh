#!/usr/bin/env bash
# Runs a command with throwaway PostgreSQL servers for the TLS tests
# (crates/agent_state/tests/tls.rs), and stops them when it ends, also on failure or interrupt:
#
#   tls.sh CMD...
#
# In a fresh mktemp -d directory it makes, with openssl: a CA (EC P-384, signing with SHA-384,
# so SCRAM's channel binding must hash with SHA-384), a server certificate for DNS:localhost
# and IP:127.0.0.1 signed by it, an expired one, one from another CA, and a client certificate
# (CN=certuser). Then one cluster, copied four times, each server on 127.0.0.1 only at a free
# port, its socket in the directory:
#   AGENT_STATE_TEST_TLS_PORT          ssl=on, pg_hba with hostssl lines only: scram-sha-256
#                                      for tlsuser, cert for certuser (client certificates)
#   AGENT_STATE_TEST_TLS_EXPIRED_PORT  the same with the expired certificate
#   AGENT_STATE_TEST_TLS_OTHER_CA_PORT the same with the other CA's certificate
#   AGENT_STATE_TEST_PLAIN_PORT        ssl=off, host lines (scram-sha-256): offers no TLS
# AGENT_STATE_TEST_TLS_DIR names the certificates' directory (ca.pem, client.pem, client.key,
# other-ca.pem); AGENT_STATE_TEST_TLS_PASSWORD is tlsuser's password.
#
# A server that cannot start is a failure under CI=true; elsewhere it is reported and the
# command runs without (the tests then say they were skipped). When AGENT_STATE_TEST_TLS_PORT
# is already set, the command runs against those servers. Setup takes about 5 s.
set -euo pipefail
# shellcheck source=lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

# Already set up (an outer tls.sh): run the command against those servers.
if [[ -n ${AGENT_STATE_TEST_TLS_PORT:-} ]]; then
    exec "$@"
fi

dir=$(mktemp -d /tmp/agent-state-tls.XXXXXX)
servers=()
cleanup() {
    local data
    for data in "${servers[@]}"; do
        if [[ -f $data/postmaster.pid ]]; then
            as_owner "$bin/pg_ctl" -D "$data" -m immediate -w stop >/dev/null 2>&1 || true
        fi
    done
    rm -rf "$dir"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

setup() {
    bin=$(find_bin) || { echo "PostgreSQL not found (tests/pg/server.sh installs it)"; return 1; }
    command -v openssl >/dev/null || { echo "openssl not found"; return 1; }
    local c=$dir/certs
    mkdir -p "$c"
    (
        cd "$c"
        openssl_quiet() { openssl "$@" 2>/dev/null; }
        cat >server.ext <<'EOF'
basicConstraints = critical, CA:FALSE
keyUsage = critical, digitalSignature, keyEncipherment
extendedKeyUsage = serverAuth
subjectAltName = DNS:localhost, IP:127.0.0.1
EOF
        cat >client.ext <<'EOF'
basicConstraints = critical, CA:FALSE
keyUsage = critical, digitalSignature, keyEncipherment
extendedKeyUsage = clientAuth
EOF
        for ca in ca other-ca; do
            openssl_quiet req -x509 -new -newkey ec -pkeyopt ec_paramgen_curve:P-384 -nodes \
                -keyout $ca.key -out $ca.pem -days 30 -sha384 -subj "/CN=agent-state test $ca" \
                -addext "basicConstraints=critical,CA:TRUE" \
                -addext "keyUsage=critical,keyCertSign,cRLSign"
        done
        newkey() { openssl_quiet req -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
            -keyout "$1.key" -out "$1.csr" -subj "$2"; }
        newkey server /CN=localhost
        openssl_quiet x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial \
            -days 30 -sha384 -extfile server.ext -out server.pem
        newkey server-other /CN=localhost
        openssl_quiet x509 -req -in server-other.csr -CA other-ca.pem -CAkey other-ca.key \
            -CAcreateserial -days 30 -sha384 -extfile server.ext -out server-other.pem
        # An expired certificate: `openssl x509` of OpenSSL 3.0 cannot backdate, `openssl ca` can.
        newkey server-expired /CN=localhost
        mkdir -p ca-db
        : >ca-db/index.txt
        echo 01 >ca-db/serial
        cat >ca.cnf <<EOF
[ca]
default_ca = test
[test]
database = ca-db/index.txt
new_certs_dir = ca-db
serial = ca-db/serial
default_md = sha384
policy = any
[any]
commonName = supplied
EOF
        openssl_quiet ca -batch -config ca.cnf -cert ca.pem -keyfile ca.key \
            -in server-expired.csr -out server-expired.pem -notext \
            -startdate 20200101000000Z -enddate 20200201000000Z -extfile server.ext
        # The client certificate: cert authentication maps its CN to the role.
        newkey client /CN=certuser
        openssl_quiet x509 -req -in client.csr -CA ca.pem -CAkey ca.key -CAcreateserial \
            -days 30 -sha384 -extfile client.ext -out client.pem
        # The server's keys: owned by postgres, mode 0600 (the server refuses others).
        chmod 644 ./*.pem
        chmod 600 ./*.key
    ) || { echo "making the certificates failed"; return 1; }
    for f in server server-other server-expired; do
        [[ -s $c/$f.pem ]] || { echo "no $f.pem"; return 1; }
    done
    chmod 755 "$dir" "$c"
    # The tests read the client key as this user; the servers read their keys as postgres.
    mkdir -p "$dir/keys"
    local f
    for f in server server-other server-expired; do
        cp "$c/$f.key" "$dir/keys/$f.key"
    done
    if [[ $(id -u) -eq 0 ]]; then
        chown -R postgres: "$dir/keys"
        chown postgres: "$dir"
    fi
    chmod 700 "$dir/keys"
    chmod 600 "$dir/keys"/*.key

    # One cluster with the roles, copied for each server.
    as_owner "$bin/initdb" -D "$dir/data" -U postgres -A trust -E UTF8 --no-locale --no-sync \
        >"$dir/initdb.log" 2>&1 || { cat "$dir/initdb.log"; return 1; }
    cat >"$dir/hba-tls.conf" <<'EOF'
local   all  all                      trust
hostssl all  certuser  127.0.0.1/32   cert
hostssl all  all       127.0.0.1/32   scram-sha-256
EOF
    cat >"$dir/hba-plain.conf" <<'EOF'
local   all  all                      trust
host    all  all       127.0.0.1/32   scram-sha-256
EOF
    chmod 644 "$dir"/hba-*.conf
    local port
    port=$(free_port)
    servers+=("$dir/data")
    as_owner "$bin/pg_ctl" -D "$dir/data" -l "$dir/setup.log" -w -t 60 \
        -o "-c listen_addresses='' -k $dir -p $port" start >/dev/null \
        || { cat "$dir/setup.log"; return 1; }
    as_owner "$bin/psql" -q -h "$dir" -p "$port" -U postgres -d postgres -v ON_ERROR_STOP=1 <<EOF \
        || return 1
SET password_encryption = 'scram-sha-256';
CREATE ROLE tlsuser LOGIN SUPERUSER PASSWORD '$AGENT_STATE_TEST_TLS_PASSWORD';
CREATE ROLE certuser LOGIN SUPERUSER;
EOF
    as_owner "$bin/pg_ctl" -D "$dir/data" -m fast -w stop >/dev/null
    local name
    for name in tls expired other plain; do
        as_owner cp -a "$dir/data" "$dir/data-$name"
    done

    start() { # name port ssl-options hba
        servers+=("$dir/data-$1")
        as_owner "$bin/pg_ctl" -D "$dir/data-$1" -l "$dir/$1.log" -w -t 60 -o \
            "-c listen_addresses='127.0.0.1' -p $2 -k $dir -c password_encryption=scram-sha-256 \
             -c hba_file=$4 $3" start >/dev/null || { cat "$dir/$1.log"; return 1; }
    }
    local k=$dir/keys
    ssl() { echo "-c ssl=on -c ssl_cert_file=$c/$1.pem -c ssl_key_file=$k/$1.key -c ssl_ca_file=$c/ca.pem"; }
    AGENT_STATE_TEST_TLS_PORT=$(free_port)
    start tls "$AGENT_STATE_TEST_TLS_PORT" "$(ssl server)" "$dir/hba-tls.conf" || return 1
    AGENT_STATE_TEST_TLS_EXPIRED_PORT=$(free_port)
    start expired "$AGENT_STATE_TEST_TLS_EXPIRED_PORT" "$(ssl server-expired)" "$dir/hba-tls.conf" \
        || return 1
    AGENT_STATE_TEST_TLS_OTHER_CA_PORT=$(free_port)
    start other "$AGENT_STATE_TEST_TLS_OTHER_CA_PORT" "$(ssl server-other)" "$dir/hba-tls.conf" \
        || return 1
    AGENT_STATE_TEST_PLAIN_PORT=$(free_port)
    start plain "$AGENT_STATE_TEST_PLAIN_PORT" "-c ssl=off" "$dir/hba-plain.conf" || return 1
    export AGENT_STATE_TEST_TLS_PORT AGENT_STATE_TEST_TLS_EXPIRED_PORT \
        AGENT_STATE_TEST_TLS_OTHER_CA_PORT AGENT_STATE_TEST_PLAIN_PORT
    export AGENT_STATE_TEST_TLS_DIR=$c
}

export AGENT_STATE_TEST_TLS_PASSWORD=S3cret-tls-pw
if setup >"$dir/setup.out" 2>&1; then
    echo "tls.sh: TLS servers on 127.0.0.1 ports $AGENT_STATE_TEST_TLS_PORT (TLS only)," \
        "$AGENT_STATE_TEST_TLS_EXPIRED_PORT (expired), $AGENT_STATE_TEST_TLS_OTHER_CA_PORT" \
        "(another CA), $AGENT_STATE_TEST_PLAIN_PORT (no TLS)" >&2
else
    cat "$dir/setup.out" >&2
    if [[ ${CI:-} == true ]]; then
        echo "tls.sh: the TLS servers did not start (a failure under CI=true)" >&2
        exit 1
    fi
    echo "tls.sh: no TLS servers; the TLS tests will be skipped" >&2
    unset AGENT_STATE_TEST_TLS_PORT
fi
"$@"
