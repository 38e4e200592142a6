#!/bin/sh
# The compose system's secrets, made on its first start by the one-shot `secrets` service: a
# random password for each database role, each service's Redis user, Redis's default user, the
# script watcher's Redis user, Grafana's admin and Mailpit's two logins, each API's operator token
# and the console's, each service's fault switches token, the key customer tokens are signed with,
# the console's customer token, the Stripe simulator's key, and the connection URLs made of them. There are no
# default passwords, and nothing to run before `docker compose up`. A file that exists is kept,
# so a restart or a second `up` changes nothing; `docker compose down -v` forgets them all.
#
# They are made in $1 (the `secrets` volume, which only this service mounts). Then each container
# gets its own volume, $2/<container>, holding only what it needs, mounted read-only at
# /run/idem-secrets: a worker holds no operator token and no customer-token key, no service holds
# another's operator token, database or Redis password, and only PostgreSQL holds its superuser's.
# Read one with `docker compose exec <container> cat /run/idem-secrets/<name>` (docs/compose.md).
set -eu
dir=${1:-/run/idem-secrets}
shared=${2:-}
# Each service's Redis user and the keys it may reach, generated from the topology (pnpm k8s:generate).
users=${REDIS_USERS_TEMPLATE:-/redis-users.acl}
services='orders inventory payments notifications'
mkdir -p "$dir"

random() { od -An -N24 -tx1 /dev/urandom | tr -d ' \n'; }
# Writes a file atomically (a crash leaves no half-written secret), readable by every container's
# user (postgres, redis and node run as different ones), writable by none.
put() {
  printf '%s' "$2" >"$dir/.$1.new"
  chmod 0444 "$dir/.$1.new"
  mv -f "$dir/.$1.new" "$dir/$1"
}
# Writes a file once: a secret made on the first start stays.
keep() { if [ ! -s "$dir/$1" ]; then put "$1" "$2"; fi; }
secret() { keep "$1" "$(random)"; }
value() { cat "$dir/$1"; }

secret postgres-password
secret console-db-password
secret lessons-db-password
secret redis-password
secret grafana-admin-password
# The console's operator token: its login (it serves the compose network). It opens no API.
secret admin-token
secret jwt-secret
keep simulator-api-key "sk_test_idem_simulator_$(random)"
# The console's customer token: customer `console` (its receipts to student@example.com), signed
# with the customer-token key (orders' default issuer and audience) and valid for 30 days, made
# afresh on every start (a restarted console reads the new one). The console places and cancels
# its orders with it and holds no key: it can act as no other customer.
put console-customer-token "$(node -e '
const { createHmac } = require("node:crypto");
const key = require("node:fs").readFileSync(process.argv[1]);
const part = (value) => Buffer.from(JSON.stringify(value)).toString("base64url");
const now = Math.floor(Date.now() / 1000);
const claims = { sub: "console", email: "student@example.com", email_verified: true };
const body = `${part({ alg: "HS256", typ: "JWT" })}.${part({ ...claims, iss: "idem", aud: "idem-orders", iat: now, exp: now + 30 * 86400 })}`;
process.stdout.write(`${body}.${createHmac("sha256", key).update(body).digest("base64url")}`);
' "$dir/jwt-secret")"
keep redis-url "redis://:$(value redis-password)@redis:6379"
# The console's Redis user reads the services' journals and owns its lessons' queues, nothing else.
secret console-redis-password
# The script watcher's Redis user may PING and SCRIPT KILL, nothing else.
secret script-watcher-redis-password
keep console-redis-url "redis://idem-console:$(value console-redis-password)@redis:6379"
# The console's lessons make and drop databases of their own on the server, as `lessons`.
keep lessons-postgres-url "postgresql://lessons:$(value lessons-db-password)@postgres:5432"
# Mailpit answers its API and web UI only to `idem` (the console, and you: docs/compose.md) and
# its SMTP server only to `notifications`: no other container reads, deletes or injects a receipt.
# It reads each as an htpasswd line, where a plain password is one.
secret mailpit-api-password
secret mailpit-smtp-password
keep mailpit-ui.htpasswd "idem:$(value mailpit-api-password)"
keep mailpit-smtp.htpasswd "notifications:$(value mailpit-smtp-password)"
keep console-mail-api-url "http://idem:$(value mailpit-api-password)@mailpit:8025"
for service in $services; do
  # <service> owns its database and runs its migrations; <service>_runtime is what it runs as.
  secret "$service-db-password"
  secret "$service-runtime-db-password"
  keep "$service-owner-database-url" "postgresql://$service:$(value "$service-db-password")@postgres:5432/$service"
  keep "$service-database-url" \
    "postgresql://${service}_runtime:$(value "$service-runtime-db-password")@postgres:5432/$service"
  keep "console-$service-database-url" "postgresql://console:$(value console-db-password)@postgres:5432/$service"
  # Its API's operator token: it opens that API's operator endpoints and no other service's.
  secret "$service-admin-token"
  # Its processes' fault switches token: it opens their /faults and nothing else, and no other
  # service's; the console holds each, and never sends an operator token to a process.
  secret "$service-faults-token"
  # Its Redis user, idem-<service>, reaches only the queues it consumes and publishes to.
  secret "$service-redis-password"
  keep "$service-redis-url" "redis://idem-$service:$(value "$service-redis-password")@redis:6379"
done
# What the user gives in .env (a real Stripe key, another SMTP server) is written on every start.
put stripe-api-key "${STRIPE_API_KEY:-$(value simulator-api-key)}"
put smtp-url "${SMTP_URL:-smtp://notifications:$(value mailpit-smtp-password)@mailpit:1025}"
# Where notifications looks up a send whose reply was lost: Mailpit's search, with its API login;
# none when .env names another SMTP server (its copies are then counted, not looked up).
put smtp-lookup-url "$([ -n "${SMTP_URL:-}" ] || printf 'http://idem:%s@mailpit:8025' "$(value mailpit-api-password)")"
# A live key reaches payments only: the console's checker reads the provider with a test key (or
# the simulator's), and with a live one leaves the provider out.
case "$(value stripe-api-key)" in
  sk_live_* | rk_live_*) put console-stripe-api-key "" ;;
  *) put console-stripe-api-key "$(value stripe-api-key)" ;;
esac
# Redis's users: `default` (the healthcheck, operators), the console's (consoleRedisUser in
# @idem/messaging; docker-compose.unit.spec.ts compares the two) and each service's, its password in place.
acl="user default on >$(value redis-password) ~* &* +@all
user idem-console on >$(value console-redis-password) ~idem_lesson_* %R~idem:journal:* resetchannels +@all -@admin \
-@dangerous +info +client|setname +client|getname +client|id +cluster|slots +cluster|nodes +cluster|shards +cluster|info \
+cluster|myid +wait -script|kill -script|flush -script|debug -function"
if [ -f "$users" ]; then
  set -- -e "s/{{idem-script-watcher}}/$(value script-watcher-redis-password)/"
  for service in $services; do set -- "$@" -e "s/{{idem-$service}}/$(value "$service-redis-password")/"; done
  # Compose runs no KEDA: no user for it.
  acl="$acl
$(sed "$@" -e '/^user idem-keda /d' "$users" | grep -v '^#')"
fi
# A placeholder left in would be a password anyone can read in this repository.
case $acl in *'{{'*)
  echo "idem: $users has a user whose password this script does not fill in" >&2
  exit 1
  ;;
esac
put redis-users.acl "$acl
"

# Gives container $1 (its volume, mounted at $shared/$1) exactly the secrets named after it.
share() {
  container=$1
  shift
  [ -n "$shared" ] || return 0
  mkdir -p "$shared/$container"
  for name in "$@"; do
    cp "$dir/$name" "$shared/$container/.$name.new"
    chmod 0444 "$shared/$container/.$name.new"
    mv -f "$shared/$container/.$name.new" "$shared/$container/$name"
  done
}
share postgres postgres-password console-db-password lessons-db-password \
  $(for s in $services; do echo "$s-db-password $s-runtime-db-password"; done)
share redis redis-password redis-users.acl
share redis-script-watcher script-watcher-redis-password
share migrate $(for s in $services; do echo "$s-owner-database-url"; done)
for service in $services; do
  case $service in
    orders) api=jwt-secret own= ;;
    payments) api=stripe-api-key own=stripe-api-key ;;
    notifications) api='smtp-url smtp-lookup-url' own='smtp-url smtp-lookup-url' ;;
    *) api= own= ;;
  esac
  # The API: its own operator's routes, and for orders the customer-token key. The workers: neither.
  share "$service-api" "$service-database-url" "$service-redis-url" "$service-faults-token" "$service-admin-token" $api
  share "$service" "$service-database-url" "$service-redis-url" "$service-faults-token" $own
done
share console console-redis-url admin-token console-customer-token console-stripe-api-key lessons-postgres-url console-mail-api-url \
  $(for s in $services; do echo "console-$s-database-url $s-faults-token"; done)
share stripe-sim simulator-api-key
share mailpit mailpit-ui.htpasswd mailpit-smtp.htpasswd
share seed orders-admin-token inventory-admin-token
share grafana grafana-admin-password
echo "idem: the secrets are in $dir${shared:+, each container's in $shared/<container>}"
