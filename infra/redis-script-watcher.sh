#!/bin/sh
# The one process that watches a Redis for a Lua script that holds it past its
# busy-reply-threshold, and kills it (docs/operations.md, "A script that never ends"): a PING
# every second; an answer of BUSY is followed by SCRIPT KILL, and the outcome printed. Compose
# runs it as a service of its own, Kubernetes beside Redis in its pod (each node of a cluster
# needs one); the native run watches from the process of `pnpm start` instead
# (killRunawayScripts in @idem/messaging, which does the same).
#
# As Redis user $REDIS_USER, which may PING and SCRIPT KILL and nothing else
# (scriptWatcherRedisUser); its password in REDISCLI_AUTH, or in the file REDISCLI_AUTH_FILE
# names, which redis-cli reads itself: never on a command line.
set -u
host=${REDIS_HOST:-127.0.0.1}
port=${REDIS_PORT:-6379}
user=${REDIS_USER:-idem-script-watcher}
if [ -n "${REDISCLI_AUTH_FILE:-}" ]; then
  REDISCLI_AUTH=$(cat "$REDISCLI_AUTH_FILE")
  export REDISCLI_AUTH
fi
redis() { redis-cli -h "$host" -p "$port" --user "$user" "$@" 2>&1; }
# PID 1 of a container ignores a signal it has no handler for.
trap 'exit 0' TERM INT
echo "watching $host:$port for a script that never ends, as $user"
while :; do
  answer=$(redis ping)
  case $answer in
    BUSY*)
      case $(redis script kill) in
        OK) outcome=killed ;;
        UNKILLABLE*) outcome="unkillable: it wrote, and only an operator's SHUTDOWN NOSAVE ends it" ;;
        *) outcome=ended ;;
      esac
      echo "a Lua script held Redis past its busy-reply-threshold: $outcome"
      ;;
    # A watch that cannot log in watches nothing: say so, and stop (compose and Kubernetes restart it).
    *WRONGPASS* | *NOAUTH* | *NOPERM*)
      echo "cannot watch $host:$port as $user: $answer" >&2
      exit 1
      ;;
  esac
  sleep 1
done
