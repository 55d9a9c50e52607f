# Sourced by .ci/run: a throwaway PostgreSQL cluster on loopback for the store tests.
# start_postgres exports NBCHAT_TEST_POSTGRES_URL (a superuser URL); stop_postgres
# stops the server and removes the cluster.

pg_bin() { ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1; }

install_postgres() {
    [ -n "$(pg_bin)" ] && return 0
    as_root apt-get update -qq
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null
}

# Run a server program as the postgres OS user when we are root (the server refuses root).
as_pg() { if [ "$(id -u)" -eq 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }

start_postgres() {
    local bin port user
    bin=$(pg_bin)
    PG_DIR=$(mktemp -d /tmp/nbchat-pg.XXXXXX)
    chmod 755 "$PG_DIR"
    if [ "$(id -u)" -eq 0 ]; then chown postgres "$PG_DIR"; user=postgres; else user=$(id -un); fi
    port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    as_pg "$bin/initdb" -D "$PG_DIR/data" -A trust -U "$user" -E UTF8 >/dev/null
    # In the config file rather than on the command line, so that the tests' own
    # "pg_ctl stop" then "pg_ctl start" bring back the same server.
    as_pg tee -a "$PG_DIR/data/postgresql.conf" >/dev/null <<CONF
port = $port
listen_addresses = '127.0.0.1'
unix_socket_directories = '$PG_DIR'
max_connections = 300
fsync = off
CONF
    as_pg "$bin/pg_ctl" -D "$PG_DIR/data" -l "$PG_DIR/log" -w start >/dev/null
    export NBCHAT_TEST_POSTGRES_URL="postgresql://$user@127.0.0.1:$port/postgres"
    export NBCHAT_TEST_PG_CTL="$bin/pg_ctl -D $PG_DIR/data -l $PG_DIR/log"
}

stop_postgres() {
    [ -n "${PG_DIR:-}" ] || return 0
    as_pg "$(pg_bin)/pg_ctl" -D "$PG_DIR/data" -m immediate stop >/dev/null 2>&1 || true
    rm -rf "$PG_DIR"
}
