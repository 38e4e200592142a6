#!/bin/sh
# One database per service and two roles per service: `<service>` owns the database and is the
# role its migrations run as; `<service>_runtime` is the role the service runs as, which the
# migrate job grants its rights (data, never schema: @idem/database's `runtimeRole`). None is a
# superuser, and none reaches another service's database. The teaching console reads every
# service's database as `console`, a role that can read and write nothing else; its lessons make
# databases of their own as `lessons`, which may create databases and reach no other. The postgres
# image runs this once, on an empty volume, as its superuser. The passwords are the files
# compose generates (infra/compose-secrets.sh) in $IDEM_SECRETS — `<service>-db-password`,
# `<service>-runtime-db-password`, `console-db-password`, `lessons-db-password` — and reach psql
# through its own environment (\getenv), never a command line.
set -eu
for service in orders inventory payments notifications; do
  # Read first, each on its own line: a secret that cannot be read stops the script here (set -e),
  # where a `VAR=$(cat …) psql` prefix would ignore the failure and create a role with no password.
  owner_password=$(cat "$IDEM_SECRETS/$service-db-password")
  runtime_password=$(cat "$IDEM_SECRETS/$service-runtime-db-password")
  OWNER_PASSWORD=$owner_password RUNTIME_PASSWORD=$runtime_password \
    psql -v ON_ERROR_STOP=1 -v role="$service" -v runtime="${service}_runtime" \
    --username "${POSTGRES_USER:-postgres}" --dbname postgres --no-psqlrc --quiet <<'SQL'
\getenv owner_password OWNER_PASSWORD
\getenv runtime_password RUNTIME_PASSWORD
CREATE ROLE :"role" LOGIN PASSWORD :'owner_password';
CREATE ROLE :"runtime" LOGIN PASSWORD :'runtime_password';
CREATE DATABASE :"role" OWNER :"role";
REVOKE ALL ON DATABASE :"role" FROM PUBLIC;
SQL
done
console_password=$(cat "$IDEM_SECRETS/console-db-password")
CONSOLE_DB_PASSWORD=$console_password \
  psql -v ON_ERROR_STOP=1 --username "${POSTGRES_USER:-postgres}" --dbname postgres --no-psqlrc --quiet <<'SQL'
\getenv password CONSOLE_DB_PASSWORD
CREATE ROLE console LOGIN PASSWORD :'password';
GRANT pg_read_all_data TO console;
GRANT CONNECT ON DATABASE orders, inventory, payments, notifications TO console;
SQL
lessons_password=$(cat "$IDEM_SECRETS/lessons-db-password")
LESSONS_DB_PASSWORD=$lessons_password \
  psql -v ON_ERROR_STOP=1 --username "${POSTGRES_USER:-postgres}" --dbname postgres --no-psqlrc --quiet <<'SQL'
\getenv password LESSONS_DB_PASSWORD
CREATE ROLE lessons LOGIN CREATEDB PASSWORD :'password';
SQL
