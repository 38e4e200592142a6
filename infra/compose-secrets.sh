#!/bin/sh
# The compose system's secrets, made on its first start by the one-shot `secrets` service, into
# the `secrets` volume that every container needing one mounts read-only at /run/idem-secrets:
# a random password for each database role, Redis and Grafana's admin, the operator token, the
# key customer tokens are signed with, and the connection URLs made of them. There are no
# default passwords, and nothing to run before `docker compose up`. A file that exists is kept,
# so a restart or a second `up` changes nothing; `docker compose down -v` forgets them all.
# Read one with `docker compose exec orders-api cat /run/idem-secrets/<name>` (docs/compose.md).
set -eu
dir=${1:-/run/idem-secrets}
mkdir -p "$dir"

random() { od -An -N24 -tx1 /dev/urandom | tr -d ' \n'; }
# Writes a file once (atomically: a crash leaves no half-written secret), readable by every
# container's user (postgres, redis and node run as different ones), writable by none.
keep() {
  if [ ! -s "$dir/$1" ]; then
    printf '%s' "$2" >"$dir/.$1.new"
    chmod 0444 "$dir/.$1.new"
    mv "$dir/.$1.new" "$dir/$1"
  fi
}
secret() { keep "$1" "$(random)"; }
value() { cat "$dir/$1"; }

secret postgres-password
secret console-db-password
secret redis-password
secret grafana-admin-password
secret admin-token
secret jwt-secret
keep redis-url "redis://:$(value redis-password)@redis:6379"
for service in orders inventory payments notifications; do
  # <service> owns its database and runs its migrations; <service>_runtime is what it runs as.
  secret "$service-db-password"
  secret "$service-runtime-db-password"
  keep "$service-owner-database-url" "postgresql://$service:$(value "$service-db-password")@postgres:5432/$service"
  keep "$service-database-url" \
    "postgresql://${service}_runtime:$(value "$service-runtime-db-password")@postgres:5432/$service"
  keep "console-$service-database-url" "postgresql://console:$(value console-db-password)@postgres:5432/$service"
done
echo "idem: the secrets are in $dir"
