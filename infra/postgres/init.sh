#!/bin/sh
# One database per service, each owned by the service's own role: a service (and the migrate
# job, which uses the same roles) can reach its own database and no other, and none is a
# superuser. The teaching console reads every service's database as `console`, a role that can
# read and write nothing else. The postgres image runs this once, on an empty volume, as its
# superuser; each <SERVICE>_DB_PASSWORD and CONSOLE_DB_PASSWORD comes from .env.
set -eu
for service in orders inventory payments notifications; do
  password=$(printenv "$(echo "$service" | tr a-z A-Z)_DB_PASSWORD")
  psql -v ON_ERROR_STOP=1 -v role="$service" -v password="$password" \
    --username "${POSTGRES_USER:-postgres}" --dbname postgres --no-psqlrc --quiet <<'SQL'
CREATE ROLE :"role" LOGIN PASSWORD :'password';
CREATE DATABASE :"role" OWNER :"role";
REVOKE ALL ON DATABASE :"role" FROM PUBLIC;
SQL
done
psql -v ON_ERROR_STOP=1 -v password="$CONSOLE_DB_PASSWORD" \
  --username "${POSTGRES_USER:-postgres}" --dbname postgres --no-psqlrc --quiet <<'SQL'
CREATE ROLE console LOGIN PASSWORD :'password';
GRANT pg_read_all_data TO console;
GRANT CONNECT ON DATABASE orders, inventory, payments, notifications TO console;
SQL
