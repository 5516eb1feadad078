#!/usr/bin/env bash
# Starts (or stops) the real servers the tests use, on loopback only:
#   PostgreSQL on 55432, MariaDB on 53306 (plain or TLS), Redis on 56379 (plain) and 56380 (TLS).
# The TLS certificates come from a CA made here ($dir/tls/ca.pem, exported as SVC_TEST_TLS_CA).
# `start` prints export lines for the tests' environment; `stop` ends them and removes their data.
set -euo pipefail
dir=${SVC_TEST_SERVICES_DIR:-/tmp/svc-test-services}
pg_port=55432; my_port=53306; redis_port=56379; redis_tls_port=56380

pg_bin() { ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1; }

# A CA and a certificate it signs for 127.0.0.1 and localhost, which MariaDB and Redis serve.
make_tls() {
  [ -s "$dir/tls/server.pem" ] && return
  rm -rf "$dir/tls"; mkdir -p "$dir/tls"
  local ec=(-newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes)
  (cd "$dir/tls" &&
    openssl req -x509 "${ec[@]}" -keyout ca.key -out ca.pem -days 3650 -subj '/CN=svc test services CA' &&
    openssl req "${ec[@]}" -keyout server.key -out server.csr -subj '/CN=127.0.0.1' &&
    printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\n' >san.cnf &&
    openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out server.pem -days 3650 -extfile san.cnf) >/dev/null 2>&1
  # MariaDB runs as root here, Redis too; the key stays private to root.
  chmod 600 "$dir/tls/server.key" "$dir/tls/ca.key"
}

my_ok() { mariadb-admin --protocol=tcp -h 127.0.0.1 -P $my_port -usvc -psvc ping >/dev/null 2>&1; }
# A server without TLS (started by an older copy of this script) or with another CA's certificate is replaced.
my_tls_ok() {
  mariadb --protocol=tcp -h 127.0.0.1 -P $my_port -usvc -psvc --ssl --ssl-ca="$dir/tls/ca.pem" --ssl-verify-server-cert -N -e 'SELECT 1' >/dev/null 2>&1
}
redis_ok() { redis-cli -h 127.0.0.1 -p $redis_port ping >/dev/null 2>&1; }
redis_tls_ok() { redis-cli -h 127.0.0.1 -p $redis_tls_port --tls --cacert "$dir/tls/ca.pem" ping >/dev/null 2>&1; }

start() {
  mkdir -p "$dir"
  make_tls
  # PostgreSQL refuses to run as root: the cluster belongs to the postgres account.
  if ! pg_isready -h 127.0.0.1 -p $pg_port -q 2>/dev/null; then
    rm -rf "$dir/pg"; mkdir -p "$dir/pg"; chown postgres: "$dir/pg"
    su postgres -s /bin/sh -c "$(pg_bin)/initdb -D $dir/pg/data -A trust -U postgres >/dev/null"
    su postgres -s /bin/sh -c "$(pg_bin)/pg_ctl -D $dir/pg/data -l $dir/pg/log -w -o '-h 127.0.0.1 -p $pg_port -k $dir/pg' start >/dev/null"
  fi
  # MariaDB: a throwaway data dir, an svc account reachable over TCP.
  if my_ok && ! my_tls_ok; then
    mariadb-admin --protocol=tcp -h 127.0.0.1 -P $my_port -usvc -psvc shutdown >/dev/null 2>&1 || true
    for _ in $(seq 1 100); do my_ok || break; sleep 0.2; done
  fi
  if ! my_ok; then
    rm -rf "$dir/my"; mkdir -p "$dir/my"
    mariadb-install-db --user=root --datadir="$dir/my/data" --auth-root-authentication-method=normal >/dev/null 2>&1
    cat >"$dir/my/init.sql" <<SQL
CREATE USER IF NOT EXISTS 'svc'@'127.0.0.1' IDENTIFIED BY 'svc';
CREATE USER IF NOT EXISTS 'svc'@'localhost' IDENTIFIED BY 'svc';
GRANT ALL PRIVILEGES ON *.* TO 'svc'@'127.0.0.1' WITH GRANT OPTION;
GRANT ALL PRIVILEGES ON *.* TO 'svc'@'localhost' WITH GRANT OPTION;
SQL
    (mariadbd --user=root --datadir="$dir/my/data" --socket="$dir/my/sock" --pid-file="$dir/my/pid" \
      --port=$my_port --bind-address=127.0.0.1 --skip-name-resolve --init-file="$dir/my/init.sql" \
      --innodb-buffer-pool-size=64M --log-error="$dir/my/log" \
      --ssl-ca="$dir/tls/ca.pem" --ssl-cert="$dir/tls/server.pem" --ssl-key="$dir/tls/server.key" >/dev/null 2>&1 &)
    for _ in $(seq 1 100); do my_ok && break; sleep 0.2; done
  fi
  if redis_ok && ! redis_tls_ok; then
    redis-cli -h 127.0.0.1 -p $redis_port shutdown nosave >/dev/null 2>&1 || true
    for _ in $(seq 1 50); do redis_ok || break; sleep 0.1; done
  fi
  if ! redis_ok; then
    mkdir -p "$dir/redis"
    redis-server --bind 127.0.0.1 --port $redis_port --save '' --appendonly no --daemonize yes \
      --tls-port $redis_tls_port --tls-cert-file "$dir/tls/server.pem" --tls-key-file "$dir/tls/server.key" \
      --tls-ca-cert-file "$dir/tls/ca.pem" --tls-auth-clients no \
      --dir "$dir/redis" --pidfile "$dir/redis/pid" --logfile "$dir/redis/log" >/dev/null
    for _ in $(seq 1 50); do redis_ok && redis_tls_ok && break; sleep 0.1; done
  fi
  echo "export SVC_TEST_PG_URL=postgres://postgres@127.0.0.1:$pg_port/postgres"
  echo "export SVC_TEST_MYSQL_HOST=127.0.0.1 SVC_TEST_MYSQL_PORT=$my_port SVC_TEST_MYSQL_USER=svc SVC_TEST_MYSQL_PASSWORD=svc"
  echo "export SVC_TEST_REDIS_HOST=127.0.0.1 SVC_TEST_REDIS_PORT=$redis_port SVC_TEST_REDIS_TLS_PORT=$redis_tls_port"
  echo "export SVC_TEST_TLS_CA=$dir/tls/ca.pem"
}

stop() {
  [ -d "$dir/pg/data" ] && su postgres -s /bin/sh -c "$(pg_bin)/pg_ctl -D $dir/pg/data -m immediate stop >/dev/null 2>&1" || true
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
