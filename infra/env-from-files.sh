#!/bin/sh
# The idem images' entrypoint: the `_FILE` convention of the official images. For each variable
# NAME_FILE, NAME is set to that file's content (compose points them at the secrets it generates,
# infra/compose-secrets.sh), so no secret is in the container's configuration or `docker
# inspect`. Then the command runs in its place, as PID 1, and receives SIGTERM itself.
set -eu
for name in $(env | sed -n 's/^\([A-Za-z_][A-Za-z0-9_]*\)_FILE=.*/\1/p'); do
  if [ -n "$(printenv "$name" || true)" ]; then
    echo "both $name and ${name}_FILE are set: set one of them" >&2
    exit 1
  fi
  file=$(printenv "${name}_FILE")
  if ! value=$(cat "$file"); then
    echo "${name}_FILE names $file, which cannot be read" >&2
    exit 1
  fi
  export "$name=$value"
  unset "${name}_FILE"
done
exec "$@"
