#!/usr/bin/env bash
# The database's own ceiling on one hot row, with no application in between: mariadb-slap runs
# transactions that take units from one stock row with a conditional UPDATE and insert the
# orders. What the purchase path is compared with (sellout-vs-raw.sh, docs/benchmarks.md).
#
#   loadtest/raw-hot-row.sh [concurrency=16] [transactions=40000] [batch=1]
#
# batch=1: one order per transaction (BEGIN; UPDATE ... WHERE qty > 0; INSERT; COMMIT), the
# ceiling of a design that commits every order alone; prints "raw_orders_per_s N" last.
# batch=B>1: B orders per transaction (the UPDATE takes B units, one INSERT of B rows), the
# ceiling of a batching design such as the group commit; prints "raw_batched_orders_per_s N".
# Counts the orders the database holds afterwards, not the statements sent. Needs mariadb and
# mariadb-slap, MariaDB on TEST_MYSQL_URL (default mysql://root@127.0.0.1:3306); loopback only.
set -euo pipefail
C="${1:-16}"; T="${2:-40000}"; B="${3:-1}"
URL="${TEST_MYSQL_URL:-mysql://root@127.0.0.1:3306}"
hostport="${URL#mysql://}"; hostport="${hostport#*@}"; hostport="${hostport%%/*}"
HOST="${hostport%%:*}"; PORT="${hostport##*:}"
DB="rawhot_$$"
M=(mariadb -h "$HOST" -P "$PORT" -u root)
"${M[@]}" -e "CREATE DATABASE $DB; USE $DB;
  CREATE TABLE stock (id INT PRIMARY KEY, qty INT NOT NULL, CHECK (qty >= 0)) ENGINE=InnoDB;
  CREATE TABLE orders (id BIGINT AUTO_INCREMENT PRIMARY KEY, user_id BIGINT NOT NULL, qty INT NOT NULL) ENGINE=InnoDB;
  INSERT INTO stock VALUES (1, 2000000000);"
trap '"${M[@]}" -e "DROP DATABASE IF EXISTS $DB"' EXIT
if [ "$B" = 1 ]; then
  take="UPDATE stock SET qty=qty-1 WHERE id=1 AND qty>0"
  rows="(FLOOR(RAND()*1000000000),1)"
  label=raw_orders_per_s
else
  take="UPDATE stock SET qty=qty-$B WHERE id=1 AND qty>=$B"
  rows=$(python3 -c "print(','.join(['(FLOOR(RAND()*1000000000),1)'] * $B))")
  label=raw_batched_orders_per_s
fi
out=$(mariadb-slap -h "$HOST" -P "$PORT" -u root --create-schema="$DB" --concurrency="$C" \
  --iterations=1 --number-of-queries=$((T * 4)) --delimiter=";" \
  --query="BEGIN;$take;INSERT INTO orders(user_id,qty) VALUES $rows;COMMIT" 2>&1)
secs=$(echo "$out" | awk '/Average number of seconds to run all queries/ {print $(NF-1)}')
n=$("${M[@]}" -N -e "SELECT COUNT(*) FROM $DB.orders")
[ -n "$secs" ] && [ "$n" -gt 0 ] || { echo "FAIL: mariadb-slap ran nothing: $out" >&2; exit 1; }
echo "$out" | grep -E "seconds|clients" >&2
python3 -c "print(f'$label {int($n / float($secs))}  (orders {$n}, {float($secs):.2f} s, concurrency $C, batch $B)')"
