# Sourced by the load-test scripts that start their own server (sellout-vs-raw.sh, spike.sh,
# entries-spike.sh): a fresh MariaDB database and a release goods-server on it in production
# mode (GATE=redis, trusted identity headers, a fresh draw seal key), both removed when the
# script exits.
#
#   start_release_server NAME PORT [VAR=VALUE ...]   # sets DB, BASE, SERVER; fails if not ready
#
# Reads SERVER_BIN (default target/release/goods-server), TEST_MYSQL_URL, TEST_REDIS_URL.

start_release_server() {
  local name="$1" port="$2"; shift 2
  local mysql="${TEST_MYSQL_URL:-mysql://root@127.0.0.1:3306}"
  local redis="${TEST_REDIS_URL:-redis://127.0.0.1:6379}"
  DB="${name}_$(date +%s)_$$"
  BASE="http://127.0.0.1:$port"
  RELEASE_DB_HOSTPORT="${mysql#mysql://}"; RELEASE_DB_HOSTPORT="${RELEASE_DB_HOSTPORT#*@}"
  RELEASE_DB_HOSTPORT="${RELEASE_DB_HOSTPORT%%/*}"
  # Several hosts (a Galera Cluster): the database is made through the first, and replicates.
  RELEASE_DB_HOSTPORT="${RELEASE_DB_HOSTPORT%%,*}"
  release_sql "CREATE DATABASE $DB"
  SERVER=""
  trap stop_release_server EXIT
  env AUTH_MODE=trusted-header BIND_ADDR="127.0.0.1:$port" DATABASE_URL="$mysql/$DB" DATABASE_MIGRATE=true \
    GATE=redis REDIS_URL="$redis" REDIS_KEY_PREFIX="$name:$DB:" RUST_LOG=warn OPS_BIND_ADDR=127.0.0.1:0 \
    DRAW_SEAL_KEY="$(openssl rand -base64 32)" \
    "$@" "${SERVER_BIN:-target/release/goods-server}" &
  SERVER=$!
  for _ in $(seq 1 100); do curl -sf "$BASE/health/ready" >/dev/null && return 0; sleep 0.1; done
  echo "FAIL: the server did not start"; exit 1
}

release_sql() {
  mariadb -h "${RELEASE_DB_HOSTPORT%%:*}" -P "${RELEASE_DB_HOSTPORT##*:}" -u root -e "$1"
}

stop_release_server() {
  if [ -n "${SERVER:-}" ]; then kill "$SERVER" 2>/dev/null || true; wait "$SERVER" 2>/dev/null || true; fi
  [ -n "${DB:-}" ] && release_sql "DROP DATABASE IF EXISTS $DB"
}
