#!/usr/bin/env bash
# Starts (or stops) the real servers the tests use, on loopback only:
#   PostgreSQL on 55432, MariaDB on 53306 (plain or TLS), Redis on 56379 (plain) and 56380 (TLS).
# The TLS certificates come from a CA made here ($dir/tls/ca.pem, exported as SVC_TEST_TLS_CA).
# `start` prints export lines for the tests' environment; `stop` ends them and removes their data.
#
# Every local user reaches these ports while the tests run (as root, for tens of minutes), so:
# the accounts have a random password kept in a root-only file, MariaDB runs as `mysql` with file
# reads and writes confined to a directory of its own (as root with a known password it was a way
# to root: SELECT ... INTO DUMPFILE), PostgreSQL asks for the password over TCP (not `trust`), and
# the directory must be ours and no link (one another user made first could hand root their files).
set -euo pipefail
dir=${SVC_TEST_SERVICES_DIR:-/tmp/svc-test-services}
pg_port=55432; my_port=53306; redis_port=56379; redis_tls_port=56380

own_dir() {
  [ -e "$dir" ] || mkdir -p -m 0711 "$dir"
  if [ -L "$dir" ] || [ ! -d "$dir" ] || [ "$(stat -c %u "$dir")" != "$(id -u)" ]; then
    echo "test-services: $dir is not a directory of this user's (another user's, or a link): remove it or set SVC_TEST_SERVICES_DIR" >&2
    exit 1
  fi
  # Traversable for the postgres and mysql accounts, listable by nobody else.
  chmod 0711 "$dir"
}

# The accounts' password: made once per data directory, kept while the servers run.
password() {
  [ -s "$dir/password" ] || (umask 077 && openssl rand -hex 16 >"$dir/password")
  cat "$dir/password"
}

pg_bin() { ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1; }

# A CA and a certificate it signs for 127.0.0.1 and localhost, which MariaDB and Redis serve.
make_tls() {
  [ -s "$dir/tls/server.pem" ] && return
  rm -rf "$dir/tls"; mkdir -m 0711 "$dir/tls"
  local ec=(-newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes)
  (cd "$dir/tls" &&
    openssl req -x509 "${ec[@]}" -keyout ca.key -out ca.pem -days 3650 -subj '/CN=svc test services CA' &&
    openssl req "${ec[@]}" -keyout server.key -out server.csr -subj '/CN=127.0.0.1' &&
    printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\n' >san.cnf &&
    openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out server.pem -days 3650 -extfile san.cnf) >/dev/null 2>&1
  # Redis runs as root and reads the key here; MariaDB gets a copy of its own (start).
  chmod 600 "$dir/tls/server.key" "$dir/tls/ca.key"
  chmod 644 "$dir/tls/ca.pem" "$dir/tls/server.pem"
}

# The password goes in the environment, not on a command line every local user reads.
my_ok() { MYSQL_PWD=$pw mariadb-admin --protocol=tcp -h 127.0.0.1 -P $my_port -usvc ping >/dev/null 2>&1; }
# A server without TLS (started by an older copy of this script) or with another CA's certificate is replaced.
my_tls_ok() {
  MYSQL_PWD=$pw mariadb --protocol=tcp -h 127.0.0.1 -P $my_port -usvc --ssl --ssl-ca="$dir/tls/ca.pem" --ssl-verify-server-cert -N -e 'SELECT 1' >/dev/null 2>&1
}
redis_ok() { redis-cli -h 127.0.0.1 -p $redis_port ping >/dev/null 2>&1; }
redis_tls_ok() { redis-cli -h 127.0.0.1 -p $redis_tls_port --tls --cacert "$dir/tls/ca.pem" ping >/dev/null 2>&1; }

start() {
  own_dir
  pw=$(password)
  make_tls
  # PostgreSQL refuses to run as root: the cluster belongs to the postgres account. A server
  # started by an older copy of this script (trust, no password) is replaced.
  if pg_isready -h 127.0.0.1 -p $pg_port -q 2>/dev/null && [ ! -f "$dir/pg/scram" ]; then
    [ -d "$dir/pg/data" ] && su postgres -s /bin/sh -c "$(pg_bin)/pg_ctl -D '$dir/pg/data' -m immediate stop >/dev/null 2>&1" || true
  fi
  if ! pg_isready -h 127.0.0.1 -p $pg_port -q 2>/dev/null; then
    rm -rf "$dir/pg"; mkdir -m 0700 "$dir/pg"; chown postgres: "$dir/pg"
    (umask 077 && printf '%s\n' "$pw" >"$dir/pg/pwfile") && chown postgres: "$dir/pg/pwfile"
    su postgres -s /bin/sh -c "$(pg_bin)/initdb -D '$dir/pg/data' --auth-local=peer --auth-host=scram-sha-256 --pwfile='$dir/pg/pwfile' -U postgres >/dev/null"
    rm -f "$dir/pg/pwfile"; touch "$dir/pg/scram"
    su postgres -s /bin/sh -c "$(pg_bin)/pg_ctl -D '$dir/pg/data' -l '$dir/pg/log' -w -o '-h 127.0.0.1 -p $pg_port -k $dir/pg' start >/dev/null"
  fi
  # MariaDB: a throwaway data dir owned by mysql, an svc account reachable over TCP. A server
  # without TLS or this password (started by an older copy of this script) is replaced.
  if ! my_tls_ok; then
    [ -f "$dir/my/pid" ] && kill "$(cat "$dir/my/pid")" 2>/dev/null || true
    for _ in $(seq 1 100); do mariadb-admin --protocol=tcp -h 127.0.0.1 -P $my_port ping >/dev/null 2>&1 || break; sleep 0.2; done
  fi
  if ! my_ok; then
    rm -rf "$dir/my"; mkdir -m 0700 "$dir/my" "$dir/my/files"
    install -m 600 "$dir/tls/server.key" "$dir/my/server.key"
    chown -R mysql: "$dir/my"
    mariadb-install-db --user=mysql --datadir="$dir/my/data" --auth-root-authentication-method=socket >/dev/null 2>&1
    (umask 077 && cat >"$dir/my/init.sql" <<SQL
CREATE USER IF NOT EXISTS 'svc'@'127.0.0.1' IDENTIFIED BY '$pw';
CREATE USER IF NOT EXISTS 'svc'@'localhost' IDENTIFIED BY '$pw';
GRANT ALL PRIVILEGES ON *.* TO 'svc'@'127.0.0.1' WITH GRANT OPTION;
GRANT ALL PRIVILEGES ON *.* TO 'svc'@'localhost' WITH GRANT OPTION;
SQL
    ) && chown mysql: "$dir/my/init.sql"
    (mariadbd --no-defaults --user=mysql --datadir="$dir/my/data" --socket="$dir/my/sock" --pid-file="$dir/my/pid" \
      --port=$my_port --bind-address=127.0.0.1 --skip-name-resolve --init-file="$dir/my/init.sql" \
      --secure-file-priv="$dir/my/files" --innodb-buffer-pool-size=64M --log-error="$dir/my/log" \
      --ssl-ca="$dir/tls/ca.pem" --ssl-cert="$dir/tls/server.pem" --ssl-key="$dir/my/server.key" >/dev/null 2>&1 &)
    for _ in $(seq 1 100); do my_ok && break; sleep 0.2; done
  fi
  # A Redis without TLS, or one an older copy of this script started as root, is replaced.
  if redis_ok && { ! redis_tls_ok || [ "$(ps -o user= -p "$(cat "$dir/redis/pid" 2>/dev/null || echo 0)" 2>/dev/null | tr -d ' ')" != redis ]; }; then
    redis-cli -h 127.0.0.1 -p $redis_port shutdown nosave >/dev/null 2>&1 || true
    for _ in $(seq 1 50); do redis_ok || break; sleep 0.1; done
  fi
  if ! redis_ok; then
    # As the redis account, with CONFIG SET of paths, DEBUG and MODULE off (7.0's defaults, said
    # here): any local user reaches the port, and root's Redis that can move its dump file writes
    # any file of the host.
    rm -rf "$dir/redis"; mkdir -m 0700 "$dir/redis"
    install -m 600 "$dir/tls/server.key" "$dir/redis/server.key"
    chown -R redis: "$dir/redis"
    setpriv --reuid=redis --regid=redis --init-groups redis-server --bind 127.0.0.1 --port $redis_port --save '' --appendonly no --daemonize yes \
      --enable-protected-configs no --enable-debug-command no --enable-module-command no \
      --tls-port $redis_tls_port --tls-cert-file "$dir/tls/server.pem" --tls-key-file "$dir/redis/server.key" \
      --tls-ca-cert-file "$dir/tls/ca.pem" --tls-auth-clients no \
      --dir "$dir/redis" --pidfile "$dir/redis/pid" --logfile "$dir/redis/log" >/dev/null
    for _ in $(seq 1 50); do redis_ok && redis_tls_ok && break; sleep 0.1; done
  fi
  echo "export SVC_TEST_PG_URL=postgres://postgres:$pw@127.0.0.1:$pg_port/postgres"
  echo "export SVC_TEST_MYSQL_HOST=127.0.0.1 SVC_TEST_MYSQL_PORT=$my_port SVC_TEST_MYSQL_USER=svc SVC_TEST_MYSQL_PASSWORD=$pw"
  echo "export SVC_TEST_REDIS_HOST=127.0.0.1 SVC_TEST_REDIS_PORT=$redis_port SVC_TEST_REDIS_TLS_PORT=$redis_tls_port"
  echo "export SVC_TEST_TLS_CA=$dir/tls/ca.pem"
}

stop() {
  # Nothing of a directory that is not ours is trusted, its pid files least.
  if [ -L "$dir" ] || { [ -e "$dir" ] && [ "$(stat -c %u "$dir")" != "$(id -u)" ]; }; then
    echo "test-services: $dir is not a directory of this user's: left alone" >&2; return 0
  fi
  [ -d "$dir/pg/data" ] && su postgres -s /bin/sh -c "$(pg_bin)/pg_ctl -D '$dir/pg/data' -m immediate stop >/dev/null 2>&1" || true
  [ -f "$dir/my/pid" ] && kill "$(cat "$dir/my/pid")" 2>/dev/null || true
  redis-cli -h 127.0.0.1 -p $redis_port shutdown nosave >/dev/null 2>&1 || true
  sleep 0.5
  rm -rf "$dir"
}

case "${1:-start}" in
  start) start ;;
  stop) stop ;;
  *) echo "usage: $0 start|stop" >&2; exit 2 ;;
esac
