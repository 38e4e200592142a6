#!/usr/bin/env bash
# The system on this machine, in one command: makes the machine ready (scripts/machine.sh: Node.js
# of .nvmrc, PostgreSQL, Redis, the dependencies; in a terminal it asks before it installs a
# system package or changes pg_hba.conf), then `pnpm start` with the fault switches available.
# It prints where the console is and the operator token. IDEM_PREPARE=report only says what it
# would do. Every variable of `pnpm start` (IDEM_PORT_OFFSET, IDEM_REPLICAS, …) passes through.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/machine.sh

if ! prepare_machine node postgres redis dependencies; then
  machine_say "the machine is not ready: see above"
  exit 1
fi
[ "$MACHINE_MODE" = report ] && exit 0
IDEM_FAULTS_ENABLED=${IDEM_FAULTS_ENABLED:-1} exec npx -y "pnpm@$(machine_pnpm_version)" start
