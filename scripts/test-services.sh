#!/usr/bin/env bash
# Starts (or stops) the real servers the tests use, on loopback only:
#   PostgreSQL on 55432, MariaDB on 53306, Redis on 56379.
# `start` prints export lines for the tests' environment; `stop` ends them and removes their data.
set -euo pipefail
dir=${SVC_TEST_SERVICES_DIR:-/tmp/svc-test-services}
pg_port=55432; my_port=53306; redis_port=56379

pg_bin() { ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1; }

start() {
  mkdir -p "$dir"
  # PostgreSQL refuses to run as root: the cluster belongs to the postgres account.
  if ! pg_isready -h 127.0.0.1 -p $pg_port -q 2>/dev/null; then
    rm -rf "$dir/pg"; mkdir -p "$dir/pg"; chown postgres: "$dir/pg"
    su postgres -s /bin/sh -c "$(pg_bin)/initdb -D $dir/pg/data -A trust -U postgres >/dev/null"
    su postgres -s /bin/sh -c "$(pg_bin)/pg_ctl -D $dir/pg/data -l $dir/pg/log -w -o '-h 127.0.0.1 -p $pg_port -k $dir/pg' start >/dev/null"
  fi
  # MariaDB: a throwaway data dir, an svc account reachable over TCP.
  if ! mariadb-admin --protocol=tcp -h 127.0.0.1 -P $my_port -usvc -psvc ping >/dev/null 2>&1; then
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
      --innodb-buffer-pool-size=64M --log-error="$dir/my/log" >/dev/null 2>&1 &)
    for _ in $(seq 1 100); do
      mariadb-admin --protocol=tcp -h 127.0.0.1 -P $my_port -usvc -psvc ping >/dev/null 2>&1 && break; sleep 0.2
    done
  fi
  if ! redis-cli -h 127.0.0.1 -p $redis_port ping >/dev/null 2>&1; then
    mkdir -p "$dir/redis"
    redis-server --bind 127.0.0.1 --port $redis_port --save '' --appendonly no --daemonize yes \
      --dir "$dir/redis" --pidfile "$dir/redis/pid" --logfile "$dir/redis/log" >/dev/null
    for _ in $(seq 1 50); do redis-cli -h 127.0.0.1 -p $redis_port ping >/dev/null 2>&1 && break; sleep 0.1; done
  fi
  echo "export SVC_TEST_PG_URL=postgres://postgres@127.0.0.1:$pg_port/postgres"
  echo "export SVC_TEST_MYSQL_HOST=127.0.0.1 SVC_TEST_MYSQL_PORT=$my_port SVC_TEST_MYSQL_USER=svc SVC_TEST_MYSQL_PASSWORD=svc"
  echo "export SVC_TEST_REDIS_HOST=127.0.0.1 SVC_TEST_REDIS_PORT=$redis_port"
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
