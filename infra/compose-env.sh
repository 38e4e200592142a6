#!/bin/sh
# Writes .env for `docker compose up` from .env.example, with a fresh random value for every
# secret that .env.example leaves empty (the database roles, Redis, Grafana, the operator token,
# the customer-token key).
# Compose refuses to start without them: there are no default passwords.
set -eu
cd "$(dirname "$0")/.."
if [ -e .env ]; then
  echo ".env exists already; remove it first to write a new one" >&2
  exit 1
fi
secret() { od -An -N24 -tx1 /dev/urandom | tr -d ' \n'; }
while IFS= read -r line || [ -n "$line" ]; do
  case "$line" in
    *_PASSWORD= | ADMIN_TOKEN= | JWT_SECRET=) printf '%s%s\n' "$line" "$(secret)" ;;
    *) printf '%s\n' "$line" ;;
  esac
done <.env.example >.env
chmod 600 .env
echo "wrote .env with fresh secrets (the operator token is ADMIN_TOKEN in it; customer tokens: JWT_SECRET=... pnpm token <customer>)"
